"""The HTTP side: FastAPI routes in OpenAI's shapes, an API-key and body-size
guard in front of them, and every failure answered as OpenAI's error object
(never a traceback; the server goes on serving).

GET /health (no key) · GET /v1/models · GET /v1/models/{name}
POST /v1/chat/completions · POST /v1/completions
"""

from __future__ import annotations

import asyncio
import hmac
import sys
import traceback
from dataclasses import dataclass

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException

from backend.chat.targets import GGUF
from backend.serve.bridge import Bridge
from backend.serve.job import RequestJob
from backend.serve.names import ServedModels
from backend.serve.protocol import ApiError, chat_request, completion_request, parse_body
from backend.serve.responses import answers_body, completion_body, sse_events
from backend.serve.scored import refuse_for

OPEN_PATHS = {"/health"}
DEFAULT_MAX_BODY = 1 << 20   # 1 MiB of JSON is far more than a context's worth of text


@dataclass
class Settings:
    api_key: str | None = None
    max_body: int = DEFAULT_MAX_BODY


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers or None)


class Guard:
    """ASGI middleware: the API key on every route but /health, and a refusal of
    bodies declared larger than the limit before any of it is read."""

    def __init__(self, app, settings: Settings):
        self.app, self.settings = app, settings

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            error = self.check(scope["path"], dict(scope["headers"]))
            if error is not None:
                await error_response(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def check(self, path: str, headers: dict[bytes, bytes]) -> ApiError | None:
        if self.settings.api_key and path not in OPEN_PATHS:
            given = headers.get(b"authorization", b"").decode("latin-1")
            scheme, _, token = given.partition(" ")
            if not given:
                return ApiError(401, "Missing API key: send the header 'Authorization: Bearer <key>' with the key "
                                     "the server was started with (--api-key).", code="invalid_api_key")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(),
                                                                      self.settings.api_key.encode()):
                return ApiError(401, "Incorrect API key provided: use the key the server was started with "
                                     "(--api-key).", code="invalid_api_key")
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit():
                return ApiError(400, "The Content-Length header is not a number.", param="body")
            if int(length) > self.settings.max_body:
                return request_too_large(self.settings.max_body)
        return None


def host_refusal(status: int, reason: str, value: str) -> JSONResponse:
    """HostCheck's answer (backend/serve/hosts.py) in OpenAI's error shape."""
    if reason == "host":
        return error_response(ApiError(400, f"This server does not answer as {value!r} (the Host header): use the "
                                            "address it listens on, e.g. http://127.0.0.1:PORT/v1, or start it with "
                                            "--allow-remote NAME for a name of this machine.",
                                       param="host", code="invalid_host"))
    return error_response(ApiError(403, f"A page from another site ({value}) cannot use this server: call it from "
                                        "a program (the openai package, curl), not from a web page.",
                                   param="origin", code="cross_origin"))


def request_too_large(limit: int) -> ApiError:
    return ApiError(413, f"The request body is larger than this server's limit of {limit:,} bytes: send a "
                         "shorter prompt.", param="body", code="request_too_large")


async def read_body(request: Request, limit: int) -> bytes:
    """The body, counted as it arrives (a chunked body has no Content-Length to check first)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise request_too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


# The routes: module-level functions over the request; the served models, the bridge to the
# engine and the settings are the app's state (build_app), as vLLM's OpenAI entrypoints keep theirs.
router = APIRouter()


@router.get("/health")
async def health(request: Request):
    bridge = request.app.state.bridge
    return {"status": "ok", "busy": bridge.busy, "waiting": bridge.waiting(),
            "generated_tokens": bridge.generated_tokens, "batches": bridge.batches,
            "adapters": bridge.engine.attached()}   # attached now, least recently used first


@router.get("/v1/models")
async def list_models(request: Request):
    served = request.app.state.served
    return {"object": "list", "data": [_model_card(served, name) for name in served.names()]}


@router.get("/v1/models/{name:path}")
async def get_model(name: str, request: Request):
    served = request.app.state.served
    served.get(name)
    return _model_card(served, name)


@router.post("/v1/chat/completions")
async def chat(request: Request):
    return await _generate(request, chat_request)


@router.post("/v1/completions")
async def completions(request: Request):
    return await _generate(request, completion_request)


async def _generate(request: Request, parse):
    state = request.app.state
    parsed = parse(parse_body(await read_body(request, state.settings.max_body)))
    target = state.served.get(parsed.model)
    refuse_for(parsed, target)
    loop, events = asyncio.get_running_loop(), asyncio.Queue()

    def post(event) -> None:
        try:
            loop.call_soon_threadsafe(events.put_nowait, event)
        except RuntimeError:
            job.cancel.set()   # the event loop is gone (shutdown): stop generating

    job = RequestJob(target, parsed, post)
    state.bridge.submit(job)
    try:
        kind, value = await events.get()   # the prompt is checked before anything is sent
        if kind == "error":
            raise value
        if parsed.stream:
            return StreamingResponse(sse_events(parsed, value, events, job.cancel), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        text = []
        while True:
            kind, event = await events.get()
            if kind == "delta":
                text.append(event)
            elif kind == "error":
                raise event
            elif "answers" in event:   # log-probabilities, echo or several prompts (backend/serve/scored.py)
                return answers_body(parsed, event["answers"], value)
            else:
                return completion_body(parsed, "".join(text), event["finish"], value, event["completion_tokens"])
    except BaseException:
        job.cancel.set()   # an error, or the client went away: free the model
        raise


async def api_error(_request, error: ApiError):
    return error_response(error)


async def http_error(request, error: HTTPException):
    if error.status_code == 404:
        return error_response(ApiError(404, f"There is no route {request.url.path}: this server answers "
                                            "/v1/models, /v1/chat/completions, /v1/completions and /health.",
                                       code="unknown_url"))
    return error_response(ApiError(error.status_code, f"{request.method} {request.url.path}: {error.detail}.",
                                   code="method_not_allowed" if error.status_code == 405 else None))


async def unexpected(_request, error: Exception):
    traceback.print_exception(error, file=sys.stderr)   # the log keeps the traceback; the client gets a sentence
    return error_response(ApiError(500, f"Internal error ({type(error).__name__}); the server keeps running. "
                                        "See the server log for details.", type="server_error"))


def build_app(served: ServedModels, bridge: Bridge, settings: Settings, lifespan=None) -> FastAPI:
    # No /docs, /redoc or /openapi.json: a local model server does not need to describe itself.
    app = FastAPI(title="FineTune Studio serve", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.served, app.state.bridge, app.state.settings = served, bridge, settings
    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
    app.include_router(router)
    return app


def _model_card(served: ServedModels, name: str) -> dict:
    target = served.get(name)
    return {"id": name, "object": "model", "created": served.created(name), "owned_by": "finetune-studio",
            "parent": None if target.checkpoint is None or target.kind == GGUF else "base", "kind": target.kind,
            "step": target.step}
