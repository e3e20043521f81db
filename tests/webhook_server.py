"""A real local HTTP server standing in for ntfy / Slack / Discord in tests: it records every POST
and answers with the codes it is given, in order (the last one repeats)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class WebhookServer:
    answers: list[int] = field(default_factory=lambda: [200])
    posts: list[dict] = field(default_factory=list)  # {"path", "headers", "body"} per request, in order

    def __enter__(self) -> WebhookServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.posts.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(raw)})
                code = server.answers[min(len(server.posts) - 1, len(server.answers) - 1)]
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):  # quiet: the test reads `posts`
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/hook"

    def __exit__(self, *exc) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()
