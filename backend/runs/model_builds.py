"""A model's first build or conversion is a stage of the run: the offline demo
model's build (about two minutes on two CPU cores) and a GGUF file's conversion
into a Hugging Face folder (half a minute for SmolLM2-135M). A stage has its own
progress, so a user never stares at an empty train.log and "step 0 / 60 · ETA -":
train.log gets a line every ~10% and status.json a `stage` that the Runs tab
shows as a progress bar.

The builder, whichever process it is (a run, the app's background build in
backend/training/model_stage.py, the data commands' tokenizer), writes its
progress to models/.<name>-build.json; a run that needs the model mirrors that
file into its own log and status while it builds or waits for the other
builder's lock.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from backend.models.gguf_source import find_gguf
from backend.models.loading import (
    DEMO_NAMES,
    demo_model_ready,
    ensure_demo_model,
    gguf_folder,
    needs_build,
    resolve_model_path,
)
from backend.runs.files import update_status
from backend.storage.atomic_files import atomic_write_json, read_json

log = logging.getLogger("backend.train")
STAGE = "demo_model"
CONVERT_STAGE = "convert_model"
PROGRESS_FILE = ".demo-build.json"
MIRROR_EVERY_S = 1.0  # how often a run copies the build's progress into its status
LOG_EVERY = 0.1  # a train.log line per 10% of the build


class BuildStopped(Exception):
    """The run was stopped while it built the demo model (the half-built model is discarded)."""


def progress_file(models_dir: Path, name: str) -> Path:
    return Path(models_dir) / (PROGRESS_FILE if name in ("demo", "demo-tiny") else f".{name}-build.json")


def _write_progress(source: Path, should_stop=None):
    """progress(step, steps) for a build: written to `source`, at most once a second.
    Raises BuildStopped when `should_stop()` says so, so a Stop never waits for the whole build."""
    last = [0.0]

    def progress(step: int, steps: int) -> None:
        if should_stop is not None and should_stop():
            raise BuildStopped
        now = time.monotonic()
        if now - last[0] >= MIRROR_EVERY_S / 2 or step == steps:
            atomic_write_json(source, {"done": step, "total": steps, "time": time.time()})
            last[0] = now
    return progress


class Mirror(threading.Thread):
    """Copies the build's progress into the run's status.json and train.log until stopped."""

    def __init__(self, source: Path, run_dir: Path | None, stage: str = STAGE, what: str = "building the demo model: pre-training step"):
        super().__init__(name="model-build-progress", daemon=True)
        self.source, self.run_dir, self.stage, self.what = source, run_dir, stage, what
        self.finished, self.logged, self.seen = threading.Event(), -1.0, None
        self.since = time.time() - 10 * MIRROR_EVERY_S  # older progress is a finished build's

    def run(self) -> None:
        while not self.finished.wait(MIRROR_EVERY_S):
            self.copy()

    def copy(self) -> None:
        progress = read_json(self.source, default=None)
        if (not isinstance(progress, dict) or progress == self.seen or not progress.get("total")
                or (progress.get("time") or 0) < self.since):
            return
        self.seen = progress
        done, total = int(progress.get("done") or 0), int(progress["total"])
        if self.run_dir:
            update_status(self.run_dir, stage={"name": self.stage, "done": done, "total": total})
        if done / total - self.logged >= LOG_EVERY or done == total:
            log.info("%s %d / %d (%.0f%%)", self.what, done, total, 100 * done / total)
            self.logged = done / total


def prepare_demo_model(models_dir: Path, run_dir: Path | None, should_stop=None, **build_options) -> Path:
    """models_dir/demo, built first (as a stage of the run in `run_dir`) when missing or outdated.

    `run_dir` is None on ranks other than 0: they wait for the same build
    (ensure_demo_model's file lock) without writing the run's status.
    `should_stop()` true (a Stop of the run) ends the build with BuildStopped.
    """

    if demo_model_ready(models_dir):
        return Path(models_dir) / "demo"
    log.info("building the demo model: first use in this workspace, once (about 2 minutes on 2 CPU cores)")
    if run_dir:
        update_status(run_dir, stage={"name": STAGE, "done": 0, "total": None})
    source = progress_file(models_dir, "demo")
    started, mirror = time.monotonic(), Mirror(source, run_dir)
    mirror.start()
    try:
        path = ensure_demo_model(models_dir, progress=_write_progress(source, should_stop), **build_options)
    finally:
        mirror.finished.set()
        mirror.join()
        mirror.copy()  # the last step, so the log ends where the build did
        if run_dir:
            update_status(run_dir, stage=None)
    log.info("demo model ready in %s (%.0f s)", path, time.monotonic() - started)
    return path


def prepare_model(name: str, models_dir: Path, run_dir: Path | None, should_stop=None) -> str:
    """The folder of model `name`, built or converted first (as a stage of the run in `run_dir`)
    when this workspace does not have it yet; any other name comes back resolved as it is."""

    if name in DEMO_NAMES:
        return str(prepare_demo_model(models_dir, run_dir, should_stop=should_stop))
    if not needs_build(name, models_dir):
        return resolve_model_path(name, models_dir)
    log.info("converting %s into a Hugging Face folder: first use in this workspace, once", name)
    if run_dir:
        update_status(run_dir, stage={"name": CONVERT_STAGE, "done": 0, "total": None})
    source = progress_file(models_dir, _folder_name(name, models_dir))
    started = time.monotonic()
    mirror = Mirror(source, run_dir, CONVERT_STAGE, f"converting {name}: step")
    mirror.start()
    try:
        path = resolve_model_path(name, models_dir, progress=_write_progress(source, should_stop))
    finally:
        mirror.finished.set()
        mirror.join()
        mirror.copy()
        if run_dir:
            update_status(run_dir, stage=None)
    log.info("model ready in %s (%.0f s)", path, time.monotonic() - started)
    return path


def _folder_name(name: str, models_dir: Path) -> str:
    """The folder a model converts into (its progress file is named after it)."""

    gguf_file = None if Path(name).name == name and not Path(name).exists() else find_gguf(name)
    return gguf_folder(gguf_file, models_dir).name if gguf_file else name
