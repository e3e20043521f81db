"""A real local OpenAI chat-completions server in a thread, for the judge's protocol tests: each
request's user message goes to `answer(prompt, number)` (number: 1 for the first request), whose text
comes back as a chat completion; with `key`, a request without `Authorization: Bearer <key>` gets 401
as OpenAI sends it. `hold` makes every request wait until the server stops (a judge that never answers)."""

from __future__ import annotations

import json
import platform
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The openai client sends the platform in its headers: platform.processor() runs `uname -p` once per process
# and caches it. Read here, at import (collection), so the in-process tests that call it start no process.
platform.processor()


@dataclass
class ChatServer:
    answer: Callable[[str, int], str]
    key: str | None = None
    hold: bool = False
    prompts: list[str] = field(default_factory=list)  # the user message of each request, in order
    _release: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> ChatServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                if server.hold:  # the client gives up first; nothing is written to its closed socket
                    server._release.wait()
                    return None
                if server.key and self.headers.get("Authorization") != f"Bearer {server.key}":
                    return self._send(401, {"error": {"message": "Incorrect API key provided.",
                                                      "type": "invalid_request_error", "code": "invalid_api_key"}})
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                prompt = body["messages"][-1]["content"]
                server.prompts.append(prompt)
                text = server.answer(prompt, len(server.prompts))
                self._send(200, {"id": f"chatcmpl-{len(server.prompts)}", "object": "chat.completion",
                                 "created": 0, "model": body["model"],
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": text}}],
                                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

            def _send(self, code: int, data: dict) -> None:
                raw = json.dumps(data).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):  # quiet: the test reads `prompts`
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def __exit__(self, *exc) -> None:
        self._release.set()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()
