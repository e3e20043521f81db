"""Waiting for a real process or page to reach a state in tests."""

from __future__ import annotations

import time


def wait_for(predicate, what: str, limit_s: float = 300, every_s: float = 0.2):
    """Poll until `predicate()` is truthy and return its value: a hang guard,
    not a timing assertion (the limit is far above the expected time)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"gave up waiting for {what}")
