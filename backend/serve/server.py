"""Load the models, then answer HTTP with uvicorn on the socket cli.py bound.

The progress file (when the UI started us as a background job) goes
loading -> serving (with the URL and the model names) -> completed on a
clean stop (SIGTERM or Ctrl-C: uvicorn finishes the requests in flight)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys

from backend.chat.engine import ChatEngine
from backend.models import loading
from backend.runs.jobs import COMPLETED, FAILED, RUNNING, write_progress
from backend.serve.hosts import HostCheck, allowed_hosts, base_url
from backend.serve.names import ServedModels

# Seconds uvicorn lets requests in flight finish after a stop before closing them.
GRACEFUL_STOP_S = 5


def serve(args: argparse.Namespace, served: ServedModels, sock: socket.socket) -> int:
    names = served.names()
    write_progress(args.progress, state=RUNNING, stage="loading", models=names)
    engine = ChatEngine(max_adapters=args.max_adapters)
    print(f"loading {', '.join(names)} on {args.device} ...", flush=True)
    try:
        # The base and its newest adapters now (no more than stay attached); a full fine-tuning checkpoint
        # is a model of its own, and an older checkpoint attaches when asked for.
        targets = [t for t in served.refresh().values() if t.kind != "full"]
        adapters = [t for t in targets if t.kind == "lora"]
        engine.prepare([t for t in targets if t.kind != "lora"] + adapters[-args.max_adapters:], args.device)
    except loading.ModelLoadError:
        sock.close()
        raise   # cli.py refuses it, as it refuses its arguments
    except KeyboardInterrupt:
        sock.close()
        write_progress(args.progress, state=COMPLETED, stage="stopped")
        return 0
    url = base_url(args.host, args.port)
    try:
        run_http(args, served, engine, sock, url)
    except Exception as error:  # noqa: BLE001 - said in one line and in the progress file
        print(f"error: the server stopped: {type(error).__name__}: {error}", file=sys.stderr)
        write_progress(args.progress, state=FAILED, stage="stopped", error=f"The server stopped: {error}")
        return 1
    return 0


def run_http(args, served: ServedModels, engine: ChatEngine, sock: socket.socket, url: str) -> None:
    import uvicorn

    from backend.serve.app import DEFAULT_MAX_BODY, Guard, Settings, build_app, host_refusal
    from backend.serve.bridge import Bridge

    bridge = Bridge(engine, args.device, args.max_queue, args.max_batch)
    settings = Settings(api_key=args.api_key or None, max_body=args.max_body or DEFAULT_MAX_BODY)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        write_progress(args.progress, state=RUNNING, stage="serving", url=url, models=served.names(),
                       auth=bool(settings.api_key), error=None)
        print(f"serving {', '.join(served.names())} at {url}", flush=True)
        yield
        bridge.close()
        write_progress(args.progress, state=COMPLETED, stage="stopped")

    # uvicorn stops gracefully on SIGTERM / Ctrl-C, then raises the signal again to the handler
    # it found: make that handler a clean exit 0 (not a killed-by-signal status or a traceback).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_cleanly)
    app = Guard(build_app(served, bridge, settings, lifespan=lifespan), settings)
    app = HostCheck(app, allowed_hosts(args.host, args.allow_remote or ()), host_refusal)
    config = uvicorn.Config(app, log_level="info", timeout_graceful_shutdown=GRACEFUL_STOP_S, server_header=False,
                            lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def _exit_cleanly(_signum, _frame) -> None:
    # Everything is said and written by now (progress file, log): skip the seconds the
    # interpreter takes to tear torch down.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
