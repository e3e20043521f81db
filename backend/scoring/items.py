"""What a scorer takes (one answer, with what it is compared against) and what it gives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    """One answer to score. `reference`: the row's expected answer (None: the row has none);
    `identity`: the values a run filled into its data ({{name}}, {{author}}), which the learning rule
    takes as the facts an answer must hold; `tokens`: the answer's length in tokens where the caller
    knows it (TRL's completion ids), else `count_tokens(text)` counts them (the caller's tokenizer)."""

    text: str
    reference: str | None = None
    identity: tuple[str, ...] = ()
    tokens: int | None = None
    count_tokens: Callable[[str], int] | None = None

    def length(self) -> int:
        if self.tokens is not None:
            return self.tokens
        if self.count_tokens is None:
            raise ValueError("a length scorer needs the answer's tokens: pass tokens or count_tokens to the Item")
        return self.count_tokens(self.text)


@dataclass(frozen=True)
class Score:
    """`value` in [0, 1] (a reward, a mean per checkpoint); `passed`: the row counts as right."""

    value: float
    passed: bool

    @staticmethod
    def of(passed: bool) -> Score:
        return Score(1.0 if passed else 0.0, bool(passed))

    def as_dict(self) -> dict:
        return {"score": round(self.value, 4), "pass": self.passed}


@dataclass(frozen=True)
class Scorer:
    """A parsed spec: `check(item)` scores one answer. `needs_reference`: it compares against the
    row's reference answer, so a row without one scores 0 (GRPO asks the data for a reference)."""

    kind: str
    name: str
    spec: dict
    needs_reference: bool
    check: Callable[[Item], Score]

    def score(self, item: Item) -> Score:
        if self.needs_reference and (item.reference is None or not str(item.reference).strip()):
            return Score(0.0, False)  # nothing to compare against
        return self.check(item)
