"""An exclusive lock between processes (and threads) on one machine, held
through a lock file: the demo-model build, run launches and test caches use it."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path, remove: bool = False) -> Iterator[None]:
    """Hold the lock on `path`. `remove`: delete the lock file on release (while still holding it),
    so none stays beside what it guarded, refused or done (a GGUF conversion's `.NAME.lock`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = _locked(path)
    try:
        yield
    finally:
        if remove:
            path.unlink(missing_ok=True)
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _locked(path: Path):
    """An open handle on `path` holding its lock. A holder with `remove` unlinks the file before it
    releases it, so a waiter may wake up holding a file no longer at `path`, while a newcomer
    locks a new one there: the waiter then takes the lock again on the file that is there."""
    while True:
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 -- kept open: the open file is the lock
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            if _still_there(handle, path):
                return handle
        except BaseException:
            handle.close()
            raise
        handle.close()


def _still_there(handle, path: Path) -> bool:
    try:
        here, held = os.stat(path), os.fstat(handle.fileno())
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)


def try_file_lock(path: Path):
    """The lock if nobody holds it, else None; held until the returned handle is closed (or the
    process ends: the kernel releases it, so a crashed holder never leaves it taken)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 -- kept open: the open file is the lock
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle
