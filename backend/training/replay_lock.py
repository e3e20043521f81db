"""The replay cache's lock, with a word for whoever waits on it.

One process at a time answers a model's replay prompts (backend/training/replay.py): a run, the
speed probe, or the app's background preparation of its default model. A second one that needs
the same cache used to wait on the lock without a word, "step 0 / ?" for minutes. The holder now
writes who it is and how many answers it has beside the lock (`<key>.holder.json`), and a waiter
hears that every WAIT_EVERY_S, so it can say whom it waits for and how far that one is.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from backend.storage.atomic_files import atomic_write_json, read_json
from backend.storage.file_lock import try_file_lock

HOLDER_SUFFIX = ".holder.json"
WAIT_EVERY_S = 1.0  # how often a waiter tries the lock again and hears the holder's count

Progress = Callable[[int, int], None]


def holder_file(cache: Path) -> Path:
    """Where the lock's holder says who it is and how far it is: {"owner", "done", "total", "time"}."""
    return Path(cache).with_suffix(HOLDER_SUFFIX)


@contextlib.contextmanager
def replay_lock(cache: Path, owner: str | None = None,
                waiting: Callable[[dict], None] | None = None) -> Iterator[Callable[[Progress | None], Progress]]:
    """Hold the lock of replay cache `cache`. While another process holds it, `waiting(holder)` is
    called about every WAIT_EVERY_S with what that one wrote ({} before it wrote anything). `owner`
    (a run id; None: the app's background preparation) is what the next waiter hears. Yields
    `shared(progress)`: the progress callback for the generation, which tells the waiters too."""
    lock, told = Path(cache).with_suffix(".lock"), holder_file(cache)
    handle = try_file_lock(lock)
    while handle is None:
        if waiting is not None:
            waiting(read_json(told, default={}) or {})
        time.sleep(WAIT_EVERY_S)
        handle = try_file_lock(lock)
    try:
        atomic_write_json(told, {"owner": owner, "done": 0, "total": None, "time": time.time()})

        def shared(progress: Progress | None) -> Progress:
            def report(done: int, total: int) -> None:
                atomic_write_json(told, {"owner": owner, "done": done, "total": total, "time": time.time()})
                if progress is not None:
                    progress(done, total)
            return report

        yield shared
    finally:
        told.unlink(missing_ok=True)  # before the lock goes: a waiter never hears a finished holder
        handle.close()
