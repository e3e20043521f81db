"""length: the answer's length in tokens within min..max (either may be left out), counted by a
counter the caller passes (its tokenizer; GRPO gives TRL's completion ids). The value falls
linearly from 1 at the bound to 0 at twice the distance of the bound (a reward that tells a
slightly long answer from a rambling one); the row passes only within the bounds."""

from __future__ import annotations

from backend.messages import Message, msg
from backend.scoring.errors import ScorerError
from backend.scoring.items import Item, Score


def length_score(tokens: int, low: int | None, high: int | None) -> float:
    if low is not None and tokens < low:
        return max(0.0, 1.0 - (low - tokens) / max(low, 1))
    if high is not None and tokens > high:
        return max(0.0, 1.0 - (tokens - high) / max(high, 1))
    return 1.0


def build_length(spec: dict, where: Message):
    low, high = spec.get("min"), spec.get("max")
    numbers = [v for v in (low, high) if v is not None]
    if not numbers or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in numbers) \
            or (low is not None and high is not None and low > high):
        raise ScorerError(msg("scoring.length", where=where, low=low, high=high))

    def check(item: Item) -> Score:
        value = length_score(item.length(), low, high)
        return Score(value, value == 1.0)
    return check, False
