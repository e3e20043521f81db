"""Background jobs for evaluation and export: a detached `python -m ...` process
that reports through a progress file the UI polls.

Like the training worker (docs/CONTRACTS.md, processes), a job runs in its own session, so
closing the browser or restarting the app neither stops nor loses it; its
output goes to a log file, never to a pipe nobody reads (docs/LIBRARY_TRAPS.md).

Progress file (JSON, written atomically): {"state": "running" | "completed" |
"failed", "pid", "started_at", "done", "total", "stage", "error", "result"}.
A "running" file whose process is gone reads as "failed" (lost).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from backend.messages import Message, message_of, msg
from backend.runs.processes import create_time, is_alive, spawn_module
from backend.storage.atomic_files import atomic_write_json, read_json

RUNNING, COMPLETED, FAILED = "running", "completed", "failed"
T = TypeVar("T")


def launch_job(module: str, args: list[str], log_path: Path, progress_path: Path) -> int:
    """Start `python -m module args...` detached; returns its pid.

    The progress file is written right after the process starts, so a poll
    after launch_job already sees the job (and a job that dies at import reads as lost)."""
    progress_path = Path(progress_path)
    progress_path.parent.mkdir(parents=True, exist_ok=True)
    process = spawn_module(module, [*args, "--progress", str(progress_path)], Path(log_path))
    write_progress(progress_path, state=RUNNING, pid=process.pid, started_at=time.time(),
                   start_time=create_time(process.pid), done=0, total=0, stage=msg("job.stage.starting"),
                   command=process.args, log=str(log_path))
    return process.pid


def write_progress(path: Path | None, **fields) -> None:
    """Merge `fields` into the progress file (no-op without a file: plain CLI use)."""
    if path is None:
        return
    progress = read_json(path, default={}) or {}
    for key in ("stage", "error"):  # a catalogued value keeps its id for the UI's translation
        value = fields.get(key)
        if value is not None:
            fields[f"{key}_message"] = value.to_dict() if isinstance(value, Message) else None
            fields[key] = str(value)
    progress.update(fields)
    progress["updated_at"] = time.time()
    atomic_write_json(Path(path), progress)


def run_job(work: Callable[[], T], progress: Path | None, refused: type[Exception], failed: str) -> tuple[T | None, int]:
    """The body of a job's `main`: (work()'s result, 0), or (None, 2) when it raised a `refused` error,
    whose catalogued message goes to the progress file and "<failed>: <error>" to stderr. Any other error
    is written to the progress file too and raised, so the log keeps its traceback."""
    try:
        return work(), 0
    except refused as error:
        write_progress(progress, state=FAILED, error=message_of(error) or str(error))
        print(f"{failed}: {error}", file=sys.stderr)
        return None, 2
    except Exception as error:  # noqa: BLE001 - model loading etc.: the UI shows the message, the log the trace
        write_progress(progress, state=FAILED, error=f"{type(error).__name__}: {error}")
        raise


def stage_of(progress: dict, key: str = "stage") -> Message | str:
    """The job's current stage (or its `error`): the Message when it has one (translatable), else the text."""
    return Message.from_dict(progress.get(f"{key}_message")) or progress.get(key) or ""


def read_progress(path: Path) -> dict:
    """The progress file, with a vanished "running" process reported as failed."""
    progress = read_json(path, default=None)
    if not progress:
        return {}
    if progress.get("state") == RUNNING and not is_alive(progress.get("pid"), progress.get("start_time")):
        # Re-read: the job may have finished between the two reads.
        progress = read_json(path, default={}) or {}
        if progress.get("state") == RUNNING:
            progress["state"] = FAILED
            progress["error"] = progress.get("error") or (
                f"The background process (pid {progress.get('pid')}) ended without finishing; "
                f"see its log {progress.get('log', '')} and start it again.")
    return progress


def recent_jobs(folder: Path, limit: int = 10) -> list[Path]:
    """The progress files in `folder`, newest start first: what a page opened later shows again."""
    def started(path: Path) -> float:
        progress = read_json(path, default=None) or {}
        value = progress.get("started_at")
        return value if isinstance(value, (int, float)) else path.stat().st_mtime

    files = [p for p in Path(folder).glob("*.json") if p.is_file()] if Path(folder).is_dir() else []
    return sorted(files, key=started, reverse=True)[:limit]


def is_running(path: Path) -> bool:
    return read_progress(path).get("state") == RUNNING
