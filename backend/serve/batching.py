"""Several waiting requests answered by one `generate` call (`--max-batch`).

The bridge hands over greedy requests on one base (any mix of `base` and its
LoRA checkpoints: peft applies each row's adapter through `adapter_names`,
backend/chat/batch.py); each row stops at its own eos or max_tokens, and greedy
rows answer what they answer alone. The batch ends early only when every
client has left; one that leaves alone gets no more text."""

from __future__ import annotations

import sys
import traceback

from backend.chat.engine import ChatEngine
from backend.chat.generation import Reply
from backend.serve.job import FINISH, RequestJob, generation_settings, prompt_maker
from backend.serve.protocol import ApiError


class _AllLeft:
    """A stop signal for the batch: set once every request's client has gone."""

    def __init__(self, jobs: list[RequestJob]):
        self.jobs = jobs

    def is_set(self) -> bool:
        return all(job.cancel.is_set() for job in self.jobs)


def run_batch(engine: ChatEngine, device: str, jobs: list[RequestJob]) -> int:
    """Answer `jobs` together; returns the tokens generated."""
    settings = generation_settings(jobs[0].request)   # greedy: one config fits every row
    makers = [prompt_maker(job, settings) for job in jobs]
    replies, errors = [Reply() for _ in jobs], {}
    sent = [0] * len(jobs)
    try:
        for texts in engine.stream_prompts_together([job.target for job in jobs], makers, settings, device,
                                                    _AllLeft(jobs), replies, errors):
            for index, job in enumerate(jobs):
                if job.request.stream and len(texts[index]) > sent[index] and not job.cancel.is_set():
                    job.post(("delta", texts[index][sent[index]:]))
                    sent[index] = len(texts[index])
    except Exception as error:  # noqa: BLE001 - every row gets the sentence; the server keeps running
        traceback.print_exc(file=sys.stderr)
        failure = ApiError(500, f"Generation failed: {type(error).__name__}: {error}", type="server_error",
                           code="generation_failed")
        for job in jobs:
            job.post(("error", failure))
        return 0
    for index, job in enumerate(jobs):
        _finish(job, replies[index], errors.get(index), sent[index])
    return sum(reply.new_tokens for reply in replies)


def _finish(job: RequestJob, reply: Reply, error: Exception | None, sent: int) -> None:
    if error is not None:
        if not isinstance(error, ApiError):
            error = ApiError(500, f"Loading the model '{job.request.model}' failed: {error}", type="server_error",
                             code="model_error")
        job.post(("error", error))
        return
    if reply.text[sent:]:
        job.post(("delta", reply.text[sent:]))
    if reply.error:
        job.post(("error", ApiError(500, reply.error, type="server_error", code="generation_failed")))
        return
    job.post(("end", {"finish": FINISH.get(reply.finish, "stop"), "completion_tokens": reply.new_tokens}))
