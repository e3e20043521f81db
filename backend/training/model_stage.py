"""What the app and the worker add to a model's first build (the build itself, a
stage of the run with its progress, is backend/runs/model_builds.py): the app
starts the default model's build in the background as soon as it starts
(`start_background_build`, `python -m backend.training.model_stage`), so the
first Start usually finds it done; a Stop during a run's build ends the worker
`stopped`, with nothing trained (`stopped_during_build`). The background build
ends with the app that started it, and when its models folder is removed
(`OwnerWatch`): it never outlives its owner or its workspace.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from backend.config import RunConfig
from backend.messages import msg
from backend.models.loading import needs_build
from backend.runs.files import update_status
from backend.runs.model_builds import prepare_model
from backend.runs.processes import create_time, is_alive, spawn_module
from backend.training.replay import CACHE_DIR as REPLAY_CACHE_DIR
from backend.training.replay import warm_cache

log = logging.getLogger("backend.train")
# Added to the app's nice value for its background build (Unix nice: 0 normal, 19 lowest).
BACKGROUND_NICENESS = 10
WATCH_EVERY_S = 1.0  # how often the background build checks its owner and its models folder
CLEANUP_S = 10.0  # after SIGTERM, the build's own cleanup (its staging folder) before a hard exit


def stopped_during_build(run_dir: Path | None) -> int:
    """The worker's end when Stop came during the demo model's build: `stopped`, nothing trained."""
    advice = msg("train.advice.stopped_in_build")
    log.info("stopped while building the demo model: %s", advice)
    if run_dir:
        update_status(run_dir, state="stopped", exit_code=0, ended_at=time.time(), error=None, error_message=None,
                      advice=str(advice), advice_message=advice.to_dict())
    return 0


def start_background_build(models_dir: Path, name: str = "demo", replay_cache: Path | None = None,
                           owner: int | None = None):
    """Build or convert model `name` in a detached process (the app calls this at start for
    its default model), and with `replay_cache` (a datasets folder) answer its replay prompts
    too; None when the model is ready or is no model this workspace builds. The build ends
    when process `owner` (default: this one) ends or `models_dir` is removed."""

    warm = replay_cache is not None and not (Path(replay_cache) / REPLAY_CACHE_DIR).is_dir()
    if not needs_build(name, models_dir) and not warm:
        return None
    Path(models_dir).mkdir(parents=True, exist_ok=True)
    owner = os.getpid() if owner is None else owner
    args = ["--models", str(models_dir), "--model", name, "--owner", f"{owner}:{create_time(owner) or 0}"]
    if replay_cache is not None:
        args += ["--replay-cache", str(replay_cache)]
    process = spawn_module("backend.training.model_stage", args, Path(models_dir) / ".model-build.log")
    _lower_priority(process.pid)
    return process


def _lower_priority(pid: int) -> None:
    """The background build yields the CPU to the app's page and to training runs; it still takes
    every idle core. Set while the new interpreter has no thread yet: the threads it starts
    (torch's) inherit the value."""
    if not hasattr(os, "setpriority"):   # Windows
        return
    try:
        os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICENESS)
    except OSError as error:   # gone already (it failed at once: its log says why)
        log.info("could not lower the background build's priority: %s", error)


class OwnerWatch(threading.Thread):
    """Ends this build (SIGTERM to itself: the build's `finally` blocks remove its staging folder)
    once its owner process is gone or its models folder is no longer the one it started in (removed,
    or removed and made again). Detached from the app (its own session), the build would otherwise
    go on for minutes after the app closed, writing into a workspace nobody uses or that is gone."""

    def __init__(self, models_dir: Path, owner: tuple[int, float] | None):
        super().__init__(name="build-owner-watch", daemon=True)
        self.models_dir, self.owner = Path(models_dir), owner
        self.folder = _identity(self.models_dir)

    def reason(self) -> str | None:
        """Why the build must end now, or None."""
        if self.owner is not None and not is_alive(*self.owner):
            return f"the app that started it (pid {self.owner[0]}) has ended"
        if self.folder is None or _identity(self.models_dir) != self.folder:
            return f"its models folder {self.models_dir} was removed"
        return None

    def run(self) -> None:
        while (reason := self.reason()) is None:
            time.sleep(WATCH_EVERY_S)
        print(f"background build stopped: {reason}", flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(CLEANUP_S)  # still here: stuck in a C call that never returns to Python
        os._exit(1)


def _identity(folder: Path) -> tuple[int, int] | None:
    try:
        stat = folder.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _owner(value: str) -> tuple[int, float]:
    pid, _, started = value.partition(":")
    return int(pid), float(started)


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(1)  # unwinds through the build's finally blocks (build_folder removes its staging folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backend.training.model_stage",
                                     description="Build the offline demo model, or convert a GGUF model, into MODELS/<name>.")
    parser.add_argument("--models", required=True, help="the workspace's models folder")
    parser.add_argument("--model", default="demo", help="'demo', an offline model's name or a GGUF file")
    parser.add_argument("--replay-cache", type=Path, default=None,
                        help="also answer the replay prompts once into this datasets folder (backend/training/replay.py)")
    parser.add_argument("--owner", type=_owner, default=None, metavar="PID:START_TIME",
                        help="end the build when this process (pid and psutil start time) ends")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    OwnerWatch(Path(args.models), args.owner).start()
    path = prepare_model(args.model, Path(args.models), None)
    if args.replay_cache:
        warm_cache(path, args.replay_cache, RunConfig())
    print(json.dumps({"model": str(path)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
