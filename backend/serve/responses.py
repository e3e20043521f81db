"""Response bodies in OpenAI's shapes: a whole completion, or server-sent events
(one `data: {chunk}` per text piece, the finish reason, optional usage, then
`data: [DONE]`)."""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time

from backend.serve.protocol import Request


def _id(request: Request) -> str:
    return ("chatcmpl-" if request.kind == "chat" else "cmpl-") + secrets.token_hex(12)


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion_body(request: Request, text: str, finish: str, prompt_tokens: int, completion_tokens: int) -> dict:
    if request.kind == "chat":
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                  "finish_reason": finish}
        kind = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        kind = "text_completion"
    return {"id": _id(request), "object": kind, "created": int(time.time()), "model": request.model,
            "choices": [choice], "usage": usage(prompt_tokens, completion_tokens), "system_fingerprint": None}


def answers_body(request: Request, answers: list, prompt_tokens: int) -> dict:
    """A whole completion with one choice per answer (backend/serve/scored.py's Answer), each with its
    log-probabilities in the endpoint's own shape, or `"logprobs": null` when none were asked for."""
    if request.kind == "chat":
        choices = [{"index": i, "message": {"role": "assistant", "content": a.text},
                    "logprobs": None if a.tokens is None else {"content": [_chat_token(t) for t in a.tokens],
                                                                "refusal": None},
                    "finish_reason": a.finish} for i, a in enumerate(answers)]
        kind = "chat.completion"
    else:
        choices = [{"index": i, "text": a.text, "logprobs": None if a.tokens is None else _legacy(a.tokens),
                    "finish_reason": a.finish} for i, a in enumerate(answers)]
        kind = "text_completion"
    generated = sum(a.completion_tokens for a in answers)
    return {"id": _id(request), "object": kind, "created": int(time.time()), "model": request.model,
            "choices": choices, "usage": usage(prompt_tokens, generated), "system_fingerprint": None}


def _chat_token(token) -> dict:
    """OpenAI chat's entry: the token's text, log-probability and UTF-8 bytes, and its alternatives."""
    return {"token": token.text, "logprob": token.logprob, "bytes": list(token.text.encode("utf-8")),
            "top_logprobs": [{"token": text, "logprob": value, "bytes": list(text.encode("utf-8"))}
                             for text, value in token.top or []]}


def _legacy(tokens: list) -> dict:
    """OpenAI completions' parallel lists; `top_logprobs` maps each alternative's text to its log-probability
    (null for an echoed prompt's first token, like its log-probability)."""
    return {"tokens": [t.text for t in tokens], "token_logprobs": [t.logprob for t in tokens],
            "top_logprobs": [None if t.logprob is None else dict(t.top or []) for t in tokens],
            "text_offset": [t.offset for t in tokens]}


class _Chunks:
    """Chunk bodies of one streamed answer (one id and time for all of them)."""

    def __init__(self, request: Request):
        self.request, self.id, self.created = request, _id(request), int(time.time())
        self.chat = request.kind == "chat"

    def piece(self, text: str | None = None, finish: str | None = None, role: bool = False) -> dict:
        if self.chat:
            delta = ({"role": "assistant", "content": ""} if role else {}) | ({"content": text} if text else {})
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
        return self._wrap([choice])

    def usage(self, prompt_tokens: int, completion_tokens: int) -> dict:
        return self._wrap([], usage=usage(prompt_tokens, completion_tokens))

    def _wrap(self, choices: list, **extra) -> dict:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return {"id": self.id, "object": kind, "created": self.created, "model": self.request.model,
                "choices": choices, "system_fingerprint": None, **extra}


def _event(body: dict | str) -> str:
    return f"data: {body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)}\n\n"


async def sse_events(request: Request, prompt_tokens: int, events: asyncio.Queue, cancel: threading.Event):
    """The stream of one answer. Closing it early (the client left) stops generation."""
    chunks = _Chunks(request)
    try:
        if chunks.chat:
            yield _event(chunks.piece(role=True))
        while True:
            kind, value = await events.get()
            if kind == "delta":
                yield _event(chunks.piece(value))
            elif kind == "error":   # mid-stream the status is sent already: the error goes in the stream
                yield _event(value.body())
                break
            else:
                yield _event(chunks.piece(finish=value["finish"]))
                if request.include_usage:
                    yield _event(chunks.usage(prompt_tokens, value["completion_tokens"]))
                break
        yield _event("[DONE]")
    finally:
        cancel.set()   # no-op once the answer is complete
