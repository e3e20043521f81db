"""One request's generation job, as bridge.py (one request), batching.py (several in one
generate call) and scored.py (token by token) all take it: the RequestJob, the engine's settings
from the request's sampling fields, and its prompt, refused with the numbers when it does
not fit the model's context. The events a job posts are listed in bridge.py."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from backend.chat.generation import GenerationSettings, Prompt
from backend.chat.targets import ChatTarget
from backend.serve.prompts import prompt_ids
from backend.serve.protocol import ApiError, Request

# New tokens when a request gives no max_tokens (and the context leaves room).
DEFAULT_MAX_TOKENS = 256
FINISH = {"eos": "stop", "stopped": "stop", "length": "length"}


@dataclass
class RequestJob:
    target: ChatTarget
    request: Request
    post: Callable[[tuple], None]                 # thread-safe: hands one event to the waiting route
    cancel: threading.Event = field(default_factory=threading.Event)   # set when the client goes away


def prompt_maker(job: RequestJob, settings: GenerationSettings):
    """The engine's make_prompt for `job`: its token ids, refused with the numbers when they do not
    fit the context; posts ("start", prompt tokens) once they do. `.started` says it got that far."""
    def make_prompt(tokenizer, context_length: int) -> Prompt:
        request = job.request
        ids = prompt_ids(tokenizer, request)
        max_new = fit_context(len(ids), request.sampling.max_tokens, context_length, request.kind)
        if request.sampling.ignore_eos:   # in a batch: the longest row's (each row still ends at its own limit)
            settings.min_new_tokens = max(settings.min_new_tokens, max_new)
        job.post(("start", len(ids)))
        make_prompt.started = True
        return Prompt(torch.tensor([ids]), max_new)

    make_prompt.started = False
    return make_prompt


def generation_settings(request: Request) -> GenerationSettings:
    """OpenAI sampling fields -> the engine's settings (temperature 0 = greedy)."""
    sampling = request.sampling
    seed = sampling.seed if sampling.seed is not None else secrets.randbits(31)
    settings = GenerationSettings(greedy=sampling.temperature == 0, temperature=sampling.temperature or 1.0,
                                  top_p=sampling.top_p, top_k=sampling.top_k,
                                  repetition_penalty=sampling.repetition_penalty, seed=seed,
                                  stop_strings=sampling.stop)
    return settings


def fit_context(prompt_tokens: int, max_tokens: int | None, context: int, kind: str) -> int:
    """New tokens to generate, or a 400 with the numbers when prompt + answer exceed the context."""
    where = "messages" if kind == "chat" else "prompt"
    if prompt_tokens >= context:
        raise ApiError(400, f"This model's maximum context length is {context} tokens, but the {where} take "
                            f"{prompt_tokens} tokens (no room for an answer). Shorten the {where}.",
                       param=where, code="context_length_exceeded")
    if max_tokens is None:
        return min(DEFAULT_MAX_TOKENS, context - prompt_tokens)
    if prompt_tokens + max_tokens > context:
        raise ApiError(400, f"This model's maximum context length is {context} tokens. However, you requested "
                            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the {where}, {max_tokens} "
                            f"for max_tokens). Lower max_tokens or shorten the {where}.",
                       param="max_tokens", code="context_length_exceeded")
    return max_tokens
