"""Between HTTP requests and the ChatEngine: a bounded queue and one generation thread.

Concurrency model: the engine holds one base with every checkpoint attached
as an adapter, and the active adapter is model-wide state, so one request
generates at a time. Requests wait in a FIFO queue of `max_queue` places;
one more is refused at once with 429 and a Retry-After estimate. The HTTP
side never blocks a thread while it waits: the generation thread hands each
event to the request's asyncio queue (`post`), which the route awaits.

Events a job posts, in order: ("start", prompt_tokens) or ("error", ApiError),
then ("delta", text)..., then ("end", {"finish", "completion_tokens"}) or
("error", ApiError) if generation itself failed.
"""

from __future__ import annotations

import contextlib
import queue
import secrets
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from backend.chat.generation import ChatError, GenerationSettings, Prompt, Reply
from backend.chat.targets import ChatTarget
from backend.models import ModelLoadError
from backend.serve.prompts import prompt_ids
from backend.serve.protocol import ApiError, Request

# New tokens when a request gives no max_tokens (and the context leaves room).
DEFAULT_MAX_TOKENS = 256
FINISH = {"eos": "stop", "stopped": "stop", "length": "length"}


@dataclass
class Job:
    target: ChatTarget
    request: Request
    post: Callable[[tuple], None]                 # thread-safe: hands one event to the waiting route
    cancel: threading.Event = field(default_factory=threading.Event)   # set when the client goes away


class Bridge:
    def __init__(self, engine, device: str = "cpu", max_queue: int = 32):
        self.engine, self.device = engine, device
        self._jobs: queue.Queue[Job | None] = queue.Queue(maxsize=max_queue)
        self._seconds = 2.0          # running mean of a request's time, for Retry-After
        self.busy = False
        self.generated_tokens = 0    # since start, for /health
        self._thread = threading.Thread(target=self._loop, name="serve-generate", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            wait = max(1, round(self._seconds * (self._jobs.qsize() + 1)))
            raise ApiError(429, f"The server is busy: {self._jobs.qsize()} requests are waiting already (the "
                                f"queue limit). Retry in about {wait} s.", type="server_busy", code="queue_full",
                           headers={"Retry-After": str(wait)}) from None

    def waiting(self) -> int:
        return self._jobs.qsize()

    def close(self) -> None:
        with contextlib.suppress(queue.Full):   # a full queue: the daemon thread ends with the process
            self._jobs.put_nowait(None)

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if job.cancel.is_set():
                continue   # the client left while waiting
            start = time.perf_counter()
            self.busy = True
            try:
                self._run(job)
            finally:
                self.busy = False
                self._seconds = 0.8 * self._seconds + 0.2 * (time.perf_counter() - start)

    def _run(self, job: Job) -> None:
        request, reply = job.request, Reply()
        settings = generation_settings(request)
        stops = StopStrings(request.sampling.stop, job.cancel)
        started = False

        def make_prompt(tokenizer, context_length: int) -> Prompt:
            nonlocal started
            ids = prompt_ids(tokenizer, request)
            max_new = fit_context(len(ids), request.sampling.max_tokens, context_length, request.kind)
            settings.max_new_tokens = max_new
            if request.sampling.ignore_eos:
                settings.min_new_tokens = max_new
            job.post(("start", len(ids)))
            started = True
            return Prompt(torch.tensor([ids]), max_new)

        held = []   # a whole answer is handed over once: a wake-up of the HTTP loop per token costs time
        try:
            for text in self.engine.stream_prompt(job.target, make_prompt, settings, self.device, job.cancel, reply):
                piece = stops.feed(text)
                if piece and request.stream:
                    job.post(("delta", piece))
                elif piece:
                    held.append(piece)
        except ApiError as error:
            job.post(("error", error))
            return
        except (ModelLoadError, ChatError, OSError, ValueError) as error:
            what = "Generation" if started else f"Loading the model '{job.request.model}'"
            job.post(("error", ApiError(500, f"{what} failed: {error}", type="server_error", code="model_error")))
            return
        except Exception as error:  # noqa: BLE001 - the server keeps running; the log has the traceback
            traceback.print_exc(file=sys.stderr)
            job.post(("error", ApiError(500, f"Generation failed: {type(error).__name__}: {error}",
                                        type="server_error", code="generation_failed")))
            return
        self.generated_tokens += reply.new_tokens
        rest = "".join(held) + stops.flush()
        if rest:
            job.post(("delta", rest))
        if reply.error:
            job.post(("error", ApiError(500, reply.error, type="server_error", code="generation_failed")))
            return
        finish = "stop" if stops.hit else FINISH.get(reply.finish, "stop")
        job.post(("end", {"finish": finish, "completion_tokens": reply.new_tokens}))


def generation_settings(request: Request) -> GenerationSettings:
    """OpenAI sampling fields -> the engine's settings (temperature 0 = greedy)."""
    sampling = request.sampling
    seed = sampling.seed if sampling.seed is not None else secrets.randbits(31)
    settings = GenerationSettings(greedy=sampling.temperature == 0, temperature=sampling.temperature or 1.0,
                                  top_p=sampling.top_p, top_k=sampling.top_k,
                                  repetition_penalty=sampling.repetition_penalty, seed=seed)
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


class StopStrings:
    """Cuts the answer at the first stop string and ends generation there. Text that could
    still become a stop string is held back, so a stream never shows part of one."""

    def __init__(self, stops: tuple[str, ...], cancel: threading.Event):
        self.stops, self.cancel = stops, cancel
        self.hold = max((len(s) for s in stops), default=1) - 1
        self.sent = 0
        self.text = ""
        self.hit = False

    def feed(self, text: str) -> str:
        """`text` is the whole answer so far; returns the new part that is safe to send."""
        if self.hit:
            return ""
        self.text = text
        cut = min((i for i in (text.find(s, max(0, self.sent - self.hold)) for s in self.stops) if i >= 0),
                  default=-1)
        if cut >= 0:
            self.hit = True
            self.cancel.set()
            self.text = text[:cut]
            end = cut
        else:
            end = len(text) - self.hold if self.stops else len(text)
        piece = self.text[self.sent:max(self.sent, end)]
        self.sent += len(piece)
        return piece

    def flush(self) -> str:
        piece = self.text[self.sent:]
        self.sent = len(self.text)
        return piece
