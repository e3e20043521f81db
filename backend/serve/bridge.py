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

import sys
import threading
import time
import traceback
from collections import deque

from backend.chat.engine import ChatEngine
from backend.chat.generation import ChatError, Reply
from backend.chat.targets import GGUF
from backend.models.loading import ModelLoadError
from backend.serve.batching import run_batch
from backend.serve.job import FINISH, RequestJob, generation_settings, prompt_maker
from backend.serve.protocol import ApiError
from backend.serve.scored import run_scored


class Bridge:
    def __init__(self, engine: ChatEngine, device: str = "cpu", max_queue: int = 32, max_batch: int = 1):
        self.engine, self.device = engine, device
        self.max_queue, self.max_batch = max_queue, max_batch
        self._pending: deque[RequestJob] = deque()
        self._ready = threading.Condition()
        self._closed = False
        self._seconds = 2.0          # running mean of a request's time, for Retry-After
        self.busy = False
        self.generated_tokens = 0    # since start, for /health
        self.batches = 0             # generate calls that answered more than one request
        self._thread = threading.Thread(target=self._loop, name="serve-generate", daemon=True)
        self._thread.start()

    def submit(self, job: RequestJob) -> None:
        with self._ready:
            if len(self._pending) >= self.max_queue:
                wait = max(1, round(self._seconds * (len(self._pending) + 1) / max(1, self.max_batch)))
                raise ApiError(429, f"The server is busy: {len(self._pending)} requests are waiting already (the "
                                    f"queue limit). Retry in about {wait} s.", type="server_busy", code="queue_full",
                               headers={"Retry-After": str(wait)})
            self._pending.append(job)
            self._ready.notify()

    def waiting(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify()

    def _next(self) -> list[RequestJob] | None:
        """The oldest waiting request, with the waiting ones that can share its batch (in order)."""
        with self._ready:
            while not self._pending and not self._closed:
                self._ready.wait()
            if self._closed:
                return None
            first = self._pending.popleft()
            batch = [first]
            if self.max_batch > 1 and batchable(first):
                for job in list(self._pending):
                    if len(batch) >= self.max_batch:
                        break
                    if batchable(job) and batch_key(job) == batch_key(first):
                        self._pending.remove(job)
                        batch.append(job)
            return [job for job in batch if not job.cancel.is_set()]   # clients that left while waiting

    def _loop(self) -> None:
        while (jobs := self._next()) is not None:
            if not jobs:
                continue
            start = time.perf_counter()
            self.busy = True
            try:
                if len(jobs) == 1 and jobs[0].request.per_token:
                    self.generated_tokens += run_scored(self.engine, self.device, jobs[0])
                elif len(jobs) == 1:
                    self._run(jobs[0])
                else:
                    self.batches += 1
                    self.generated_tokens += run_batch(self.engine, self.device, jobs)
            finally:
                self.busy = False
                self._seconds = 0.8 * self._seconds + 0.2 * (time.perf_counter() - start)

    def _run(self, job: RequestJob) -> None:
        request, reply = job.request, Reply()
        settings = generation_settings(request)
        stops = StopStrings(request.sampling.stop, job.cancel)
        make_prompt = prompt_maker(job, settings)

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
            what = "Generation" if make_prompt.started else f"Loading the model '{job.request.model}'"
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


def batchable(job: RequestJob) -> bool:
    """Greedy requests without stop strings share a batch: one generation config fits them all,
    and each row ends at its own eos or max_tokens (backend/chat/batch.py). A GGUF file (llama.cpp
    answers one request at a time here) and a full checkpoint do not."""
    sampling = job.request.sampling
    return (sampling.temperature == 0 and not sampling.stop and job.target.kind not in ("full", GGUF)
            and not job.request.per_token)   # log-probabilities, echo, several prompts: backend/serve/scored.py


def batch_key(job: RequestJob) -> tuple:
    sampling = job.request.sampling
    return job.target.model, job.target.quantization_bits, sampling.repetition_penalty, sampling.ignore_eos

