"""One judged prompt: from the cache when it was asked before, else from the
endpoint; an answer with no readable verdict is asked once more with a
reminder of the form (the reminder makes it a different prompt, so a
greedy judge can answer differently and both answers are cached). Every
call's prompt, raw answer, verdict and reason are kept for the result file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from backend.judge.cache import JudgeCache, cache_key
from backend.judge.client import JudgeClient

PAIRWISE_REMINDER = "\n\nYour last line must be exactly one of: Verdict: A / Verdict: B / Verdict: tie"
GRADED_REMINDER = "\n\nYour last line must be exactly: Grade: N (N from 1 to 5)"


@dataclass
class CallRecord:
    prompt: str
    answer: str
    verdict: str | int | None
    reason: str
    cached: bool
    retried: bool = False
    first_answer: str | None = None  # the unreadable answer before the retry

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Asker:
    client: JudgeClient
    cache: JudgeCache
    calls: int = 0  # made to the endpoint in this run
    from_cache: int = 0
    unparsed: int = 0  # answers still unreadable after the retry
    records: list[CallRecord] = field(default_factory=list)

    def key(self, prompt: str, answers: tuple[str, ...]) -> str:
        return cache_key(self.client.endpoint.identity, prompt, answers)

    def _answer(self, prompt: str, answers: tuple[str, ...]) -> tuple[str, bool]:
        key = self.key(prompt, answers)
        cached = self.cache.get(key)
        if cached is not None:
            self.from_cache += 1
            return cached, True
        answer = self.client.ask(prompt)
        self.calls += 1
        self.cache.put(key, answer)
        return answer, False

    def ask(self, prompt: str, answers: tuple[str, ...], parse: Callable, reminder: str) -> CallRecord:
        answer, cached = self._answer(prompt, answers)
        verdict, reason = parse(answer)
        record = CallRecord(prompt, answer, verdict, reason, cached)
        if verdict is None:
            retry, retry_cached = self._answer(prompt + reminder, answers)
            verdict, reason = parse(retry)
            record = CallRecord(prompt + reminder, retry, verdict, reason, cached and retry_cached, retried=True,
                                first_answer=answer)
            self.unparsed += verdict is None
        self.records.append(record)
        return record


def plan_calls(client: JudgeClient, cache: JudgeCache, prompts: list[tuple[str, tuple[str, ...]]]) -> dict:
    """{"prompts", "cached", "calls"}: how many of these prompts the endpoint will be asked (a retry
    of an unreadable answer can add one call each, counted as it happens)."""
    identity = client.endpoint.identity
    cached = sum(cache.has(cache_key(identity, prompt, answers)) for prompt, answers in prompts)
    return {"prompts": len(prompts), "cached": cached, "calls": len(prompts) - cached}
