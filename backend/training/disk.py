"""Disk space for a run: how much a save needs, which disk it is on, and
recognising "No space left on device" whichever library raised it (Python's
OSError, safetensors' SafetensorError, a bare Exception from tokenizers)."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from backend.runs.files import FINAL_DIR, checkpoint_step, is_complete, list_checkpoints

NO_SPACE_WORDS = ("no space left on device", "os error 28", "storagefull", "disk quota exceeded")
READ_ONLY_WORDS = ("read-only file system", "os error 30")
# Files of a checkpoint that final/ does not get: what resuming the optimizer needs.
RESUME_ONLY = ("optimizer.pt", "scheduler.pt", "rng_state", "trainer_state.json", "training_args.bin", "scaler.pt")


class DiskFullError(OSError):
    """Not enough free disk for the next save."""


def human_bytes(size: float) -> str:
    """1536 -> '1.5 KiB': a size with a unit that shows it (never '0.00 GiB')."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def mount_point(path: Path) -> Path:
    """The mount point of the disk that holds `path` (the disk to free)."""
    path = Path(path).resolve()
    while not path.exists():
        path = path.parent
    while not os.path.ismount(path):
        path = path.parent
    return path


def free_on(path: Path) -> str:
    """Free space of the disk that holds `path`, with its unit ('12.0 MiB')."""
    return human_bytes(shutil.disk_usage(mount_point(path)).free)


def is_disk_full(error: BaseException | None) -> bool:
    """True for a full disk, however the error was raised or wrapped."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, DiskFullError):
            return True
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(words in str(error).lower() for words in NO_SPACE_WORDS):
            return True
        error = error.__cause__ or error.__context__
    return False


def is_read_only(error: BaseException | None) -> bool:
    """True for a write refused by a read-only filesystem (EROFS), however wrapped: libraries written in
    Rust (safetensors, tokenizers) say it only in words."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno == errno.EROFS:
            return True
        if any(words in str(error).lower() for words in READ_ONLY_WORDS):
            return True
        error = error.__cause__ or error.__context__
    return False


def folder_size(folder: Path, skip: tuple[str, ...] = ()) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*")
               if p.is_file() and not p.name.startswith(skip))


def remove_partial_saves(run_dir: Path) -> list[str]:
    """Drop what an interrupted save left: checkpoint folders newer than the last
    complete one and a final/ without its marker. Never a complete folder.
    Returns the names removed."""
    complete = list_checkpoints(run_dir)
    last = checkpoint_step(complete[-1]) if complete else -1
    partial = [f for f in list_checkpoints(run_dir, complete_only=False) if checkpoint_step(f) > last]
    final = Path(run_dir) / FINAL_DIR
    if final.exists() and not is_complete(final):
        partial.append(final)
    for folder in partial:
        if folder.is_symlink() or folder.is_file():
            folder.unlink()
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return [f.name for f in partial]
