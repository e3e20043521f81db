"""The numbers a judge result reports: a Wilson score interval for a win rate,
Cohen's kappa for agreement with votes, and a mean with its spread."""

from __future__ import annotations

import math
from collections import Counter

Z95 = 1.959964  # the normal quantile of a two-sided 95% interval


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of successes / n (successes may be fractional: wins + half the ties).
    None for n = 0: no rows, no rate."""
    if n <= 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def cohen_kappa(first: list[str], second: list[str]) -> float | None:
    """Cohen's kappa of two raters' labels on the same items: (observed - chance) / (1 - chance).
    None without items; 1.0 when both raters use one and the same label throughout (chance is 1)."""
    if len(first) != len(second):
        raise ValueError("both raters must label the same items")
    n = len(first)
    if n == 0:
        return None
    observed = sum(a == b for a, b in zip(first, second)) / n
    left, right = Counter(first), Counter(second)
    chance = sum(left[label] * right[label] for label in left) / (n * n)
    if chance >= 1.0:
        return 1.0 if observed >= 1.0 else 0.0
    return (observed - chance) / (1 - chance)


def mean_spread(values: list[float]) -> dict:
    """{"mean", "std" (sample standard deviation, 0 for one value), "n"}; mean None without values."""
    n = len(values)
    if n == 0:
        return {"mean": None, "std": None, "n": 0}
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return {"mean": mean, "std": std, "n": n}
