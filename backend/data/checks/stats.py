"""Token-length statistics and the outlier fence (numpy on compact arrays)."""

from __future__ import annotations

import numpy as np

from backend.data.checks.report import TokenStats

HISTOGRAM_BINS = 40


def token_stats(lengths, cutoff_len: int) -> TokenStats:
    """Count, mean, percentiles and a histogram whose range always shows the cutoff."""
    values = np.asarray(lengths, dtype=np.int64)
    if not len(values):
        empty = {"edges": [], "counts": [], "cutoff_len": cutoff_len}
        return TokenStats(0, 0.0, 0, 0, 0, 0, cutoff_len, 0, empty)
    top = max(int(values.max()), cutoff_len) + 1
    counts, edges = np.histogram(values, bins=HISTOGRAM_BINS, range=(0, top))
    p50, p90, p99 = (int(np.ceil(np.percentile(values, q))) for q in (50, 90, 99))
    return TokenStats(
        count=int(len(values)),
        mean=round(float(values.mean()), 2),
        p50=p50,
        p90=p90,
        p99=p99,
        max=int(values.max()),
        cutoff_len=cutoff_len,
        over_cutoff=int((values > cutoff_len).sum()),
        histogram={"edges": [round(float(e), 2) for e in edges], "counts": counts.tolist(), "cutoff_len": cutoff_len},
    )


def upper_fence(values, k: float) -> float | None:
    """Q3 + k * IQR of `values` (None for fewer than 4 values or no spread)."""
    if len(values) < 4:
        return None
    q1, q3 = np.percentile(np.asarray(values, dtype=np.int64), [25, 75])
    return None if q3 == q1 else float(q3 + k * (q3 - q1))
