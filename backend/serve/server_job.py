"""The API server as a background job of the UI: started detached through
backend/runs/jobs.py (like Evaluate and Export jobs), so it outlives a
closed browser or a restarted app, and stopped with SIGTERM (uvicorn lets
requests in flight finish), escalating to SIGKILL of its process tree.

One server per workspace from the UI, for a run or for one model on this machine
(start_local): workspace/serve/serve.json (progress: state, pid, stage "loading" |
"serving" | "stopped", url, models, run_id or local) and serve.log.
The UI's server always listens on 127.0.0.1, so it needs no API key."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from backend.chat.local_targets import LOCAL, local_targets
from backend.chat.targets import GGUF
from backend.runs.files import list_run_ids
from backend.runs.jobs import COMPLETED, RUNNING, launch_job, read_progress, write_progress
from backend.runs.processes import kill_tree, wait_gone
from backend.serve.names import served_name
from backend.storage.file_lock import file_lock

SERVE_DIR = "serve"
HOST = "127.0.0.1"
STOP_GRACE_S = 10.0


class ServeJobError(ValueError):
    """The server cannot be started or stopped; the message says what to do."""


def server_progress_path(workspace) -> Path:
    return Path(workspace.root) / SERVE_DIR / "serve.json"


def server_log_path(workspace) -> Path:
    return Path(workspace.root) / SERVE_DIR / "serve.log"


def status(workspace) -> dict:
    """The progress file ({} before the first start); a vanished server reads as failed."""
    return read_progress(server_progress_path(workspace))


def start(workspace, run_id: str, port: int, device: str = "cpu") -> int:
    """Launch `python -m backend.serve` for one run of the workspace; returns its pid.

    Under the workspace's serve lock, from the check to the progress file holding the new pid:
    two Start clicks at once (two browser tabs) launch one server, and the other click is refused
    with the one running, which serve.json names, so the panel can stop it."""
    server_progress_path(workspace).parent.mkdir(parents=True, exist_ok=True)
    with file_lock(server_progress_path(workspace).with_name(".start.lock")):
        return _start(workspace, run_id, port, device)


def _start(workspace, run_id: str, port: int, device: str) -> int:
    _check_free(workspace, port)
    if run_id not in list_run_ids(workspace.runs_dir):   # the id picks a folder: only ids that exist
        raise ServeJobError(f"Run {run_id!r} is not in this workspace: pick a run from the list.")
    args = ["--run", str(workspace.runs_dir / run_id), "--device", device]
    return _launch(workspace, args, port, run_id=run_id, device=device)


def start_local(workspace, path: str, port: int, device: str = "cpu") -> int:
    """Launch the server for one model on this machine, `path` as the cached scan lists it (a GGUF
    file: llama.cpp on the CPU; a model folder: transformers on `device`), under a safe name made from
    the name the scan gives it; returns its pid. Read in place: nothing is written beside the model."""
    server_progress_path(workspace).parent.mkdir(parents=True, exist_ok=True)
    with file_lock(server_progress_path(workspace).with_name(".start.lock")):
        _check_free(workspace, port)
        target = local_targets(workspace.root).get(f"{LOCAL}{path}")
        if target is None:   # the path picks a model: only one the scan found and still on disk
            raise ServeJobError(f"{path} is not a model the scan of this machine found: rescan, then pick it "
                                "from the list.")
        name = served_name(target.name)
        if target.kind == GGUF:
            args, device = ["--gguf", target.checkpoint], "cpu"
        else:
            args = ["--folder", target.model, "--device", device]
        return _launch(workspace, [*args, "--name", name], port, local=target.name, device=device)


def _check_free(workspace, port) -> None:
    if status(workspace).get("state") == RUNNING:
        raise ServeJobError("A server is running already: stop it first (one server per workspace from the UI).")
    if not isinstance(port, int) or not 1024 <= port <= 65535:
        raise ServeJobError(f"Port {port} is not usable: choose a number from 1024 to 65535.")


def _launch(workspace, args: list[str], port: int, **progress) -> int:
    server_progress_path(workspace).parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        server_progress_path(workspace).unlink()   # the last server's state is not this one's
    # Written before the launch (which merges its own fields in), never after: the server writes this file too.
    write_progress(server_progress_path(workspace), port=port, **progress)
    args = [*args, "--host", HOST, "--port", str(port), "--workspace", str(workspace.root)]
    return launch_job("backend.serve", args, server_log_path(workspace), server_progress_path(workspace))


def stop(workspace, grace_s: float = STOP_GRACE_S) -> bool:
    """SIGTERM, then SIGKILL after `grace_s`; True when a running server was stopped."""
    progress = status(workspace)
    if progress.get("state") != RUNNING:
        return False
    pid, started = int(progress["pid"]), progress.get("start_time")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if started is not None and not wait_gone(pid, started, grace_s):
        kill_tree(pid)
        wait_gone(pid, started, grace_s)
    if read_progress(server_progress_path(workspace)).get("state") != COMPLETED:
        write_progress(server_progress_path(workspace), state=COMPLETED, stage="stopped")   # killed before it could say so
    return True
