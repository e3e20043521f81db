"""The error of a bad scorer spec, and the field readers every kind checks its keys with: each
failure is one catalogued sentence naming the scorer (`where`: "scorer 2", "rewards entry 1") and
what to write instead."""

from __future__ import annotations

import math
import re
from typing import Any

from backend.messages import Message, UserError, msg


class ScorerError(UserError, ValueError):
    """A scorer spec that cannot be used; the message says which and what to write."""


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def text_field(spec: dict, key: str, where: Message, kind: str) -> str:
    """A text the kind looks for: a non-empty string (a number is taken as its spelling)."""
    value = spec.get(key)
    if is_finite_number(value):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise ScorerError(msg("scoring.text", where=where, kind=kind, key=key))
    return value


def pattern_field(spec: dict, where: Message, kind: str, default: str | None = None) -> re.Pattern:
    pattern = spec.get("pattern") or default
    if not isinstance(pattern, str) or not pattern:
        raise ScorerError(msg("scoring.text", where=where, kind=kind, key="pattern"))
    try:
        return re.compile(pattern, re.DOTALL)
    except re.error as error:
        raise ScorerError(msg("scoring.pattern", where=where, kind=kind, pattern=pattern, error=error)) from None


def threshold_field(spec: dict, where: Message, kind: str, default: float) -> float:
    value = spec.get("threshold", default)
    if not is_finite_number(value) or not 0 <= value <= 1:
        raise ScorerError(msg("scoring.threshold", where=where, kind=kind, value=value))
    return float(value)


def flag_field(spec: dict, key: str, where: Message, kind: str) -> bool:
    value = spec.get(key, False)
    if not isinstance(value, bool):
        raise ScorerError(msg("scoring.flag", where=where, kind=kind, key=key, value=value))
    return value
