"""Readers and writers for the files of a run (docs/CONTRACTS.md, the run directory).

Every writer of `status.json` and of markers goes through `atomic_write_*`
(tmp file + rename, backend/storage/atomic_files.py), so a reader never sees half a file."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend.storage.atomic_files import atomic_write_json, fsync_dir, fsync_file, read_json, sync_tree
from backend.storage.file_lock import file_lock

CONFIG_FILE = "config.yaml"
STATUS_FILE = "status.json"
STATUS_LOCK = ".status.lock"
METRICS_FILE = "metrics.jsonl"
LOG_FILE = "train.log"
# The libraries' own warnings, kept out of train.log (backend/training/library_logs.py)
DEBUG_LOG_FILE = "debug.log"
SUMMARY_FILE = "summary.json"
FINAL_DIR = "final"
EVAL_DIR = "eval"  # evaluation results: eval/<checkpoint>/, eval/learning.json ...
BASE = "base"  # the base model, where a checkpoint name is expected
# Written last into checkpoint-<step>/ and final/: a folder without it is incomplete.
COMPLETE_MARKER = "COMPLETE"

STATES = ("queued", "running", "completed", "stopped", "failed", "lost")
FINAL_STATES = ("completed", "stopped", "failed")


def read_status(run_dir: Path) -> dict:
    return read_json(Path(run_dir) / STATUS_FILE, default={}) or {}


def update_status(run_dir: Path, when: Callable[[dict], bool] | None = None, **fields: Any) -> dict:
    """Merge `fields` into status.json, read-modify-write under the run's lock,
    so a stop request written by one app process and the worker's progress
    never overwrite each other. With `when`, only if `when(status)` holds on
    the status as it is now on disk (else it is returned unchanged)."""
    with file_lock(Path(run_dir) / STATUS_LOCK):
        status = read_status(run_dir)
        if when is not None and not when(status):
            return status
        for key in ("error", "advice"):  # new plain text replaces an older catalogued message (backend/messages.py)
            if key in fields and f"{key}_message" not in fields:
                status.pop(f"{key}_message", None)
        status.update(fields)
        status["updated_at"] = time.time()
        atomic_write_json(Path(run_dir) / STATUS_FILE, status)
        return status


def remove_stray_tmp(run_dir: Path) -> list[Path]:
    """Delete `.status.json.<pid>.<thread>.tmp` files whose writer is gone (a
    process killed or out of disk mid-write); returns what was removed."""
    removed = []
    for tmp in Path(run_dir).glob(f".{STATUS_FILE}.*.tmp"):
        pid = tmp.name.split(".")[3] if tmp.name.count(".") >= 5 else ""
        if not pid.isdigit() or not _pid_runs(int(pid)):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def _pid_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sync_run_record(run_dir: Path) -> None:
    """train.log and metrics.jsonl on the disk, as they stand: done with each checkpoint, so that after a
    disk error and fsck the run's record reaches as far as its checkpoints (both were found 0 bytes while
    the checkpoint was intact)."""
    for name in (LOG_FILE, METRICS_FILE):
        if (Path(run_dir) / name).is_file():
            fsync_file(Path(run_dir) / name)


def mark_complete(folder: Path) -> None:
    """The marker last, after every file of the folder is on the disk: a crash or a filesystem error after
    the marker must not leave a "complete" checkpoint of empty files (the kernel writes dirty pages in
    any order), so each file and each folder is fsynced first, and the folder again for the marker."""
    folder = Path(folder)
    sync_tree(folder)
    atomic_write_json(folder / COMPLETE_MARKER, {"time": time.time()})
    fsync_dir(folder)


def is_complete(folder: Path) -> bool:
    return (Path(folder) / COMPLETE_MARKER).is_file()


def checkpoint_step(folder: Path) -> int:
    return int(Path(folder).name.rsplit("-", 1)[1])


def list_checkpoints(run_dir: Path, complete_only: bool = True) -> list[Path]:
    """checkpoint-<step> folders sorted by step; incomplete ones skipped by default."""
    folders = [
        p for p in Path(run_dir).glob("checkpoint-*")
        if p.is_dir() and p.name.rsplit("-", 1)[1].isdigit()
    ]
    if complete_only:
        folders = [p for p in folders if is_complete(p)]
    return sorted(folders, key=checkpoint_step)


def append_metrics(run_dir: Path, record: dict) -> None:
    """Append one line to metrics.jsonl. One write() of a whole line, so a
    concurrent reader sees either nothing or the full line."""
    line = json.dumps(record, ensure_ascii=False) + "\n"
    with open(Path(run_dir) / METRICS_FILE, "a", encoding="utf-8") as handle:
        handle.write(line)


class MetricsTail:
    """Incremental reader of metrics.jsonl (or another JSON-lines file of the run,
    `name`): each `read_new()` returns only the records appended since the last
    call (it keeps a byte offset and never re-reads the file). A partial last
    line is left for the next call."""

    def __init__(self, run_dir: Path, name: str = METRICS_FILE):
        self.path = Path(run_dir) / name
        self.offset = 0

    def read_new(self) -> list[dict]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        records = []
        for line in chunk[: end + 1].splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a torn line from a crash: skip it, keep the rest
        return records


def tail_text(path: Path, max_bytes: int = 20_000) -> str:
    """The last `max_bytes` of a log file, decoded leniently."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            return handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def new_run_dir(runs_dir: Path, label: str) -> Path | None:
    """A new, empty run folder named as every run is, by the app or the command line: the local time,
    then `label` (the run's run_name, else its method, as a safe name); -2, -3 ... when a run made in
    the same second has the name. None when even -999 is taken."""
    base = f"{time.strftime('%Y%m%d-%H%M%S')}-{label}"
    Path(runs_dir).mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        run_dir = Path(runs_dir) / (base if n == 1 else f"{base}-{n}")
        try:
            run_dir.mkdir()
        except FileExistsError:
            continue
        return run_dir
    return None


def list_run_ids(runs_dir: Path) -> list[str]:
    """Run folders (those with a config.yaml), most recently changed first.
    Cheap enough for a UI list refresh: one stat per run, no file reads."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    runs = [p for p in runs_dir.iterdir() if (p / CONFIG_FILE).is_file()]
    return [p.name for p in sorted(runs, key=lambda p: p.stat().st_mtime, reverse=True)]
