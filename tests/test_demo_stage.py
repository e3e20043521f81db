"""The demo model's first build is a stage of the run: train.log lines, a
`stage` in status.json and a progress bar in the Runs tab, instead of an empty
log and "step 0 / 60 · ETA -" for two minutes."""

from __future__ import annotations

import json
import logging

import pytest

from backend.runs.files import read_status, update_status
from backend.runs.info import InfoReader
from backend.runs.model_builds import prepare_demo_model
from ui.views import run_view


class StatusAtEachLine(logging.Handler):
    """Records each log line together with status.json's stage at that moment."""

    def __init__(self, run_dir):
        super().__init__(logging.INFO)
        self.run_dir, self.seen = run_dir, []

    def emit(self, record):
        self.seen.append((record.getMessage(), read_status(self.run_dir).get("stage")))


def test_first_build_reports_its_progress_then_clears_the_stage(tmp_path):
    run_dir, models = tmp_path / "runs" / "r1", tmp_path / "models"
    run_dir.mkdir(parents=True)
    update_status(run_dir, state="running", max_steps=60)
    handler = StatusAtEachLine(run_dir)
    logger = logging.getLogger("backend.train")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        path = prepare_demo_model(models, run_dir, pretrain_epochs=1)
    finally:
        logger.removeHandler(handler)
    assert (path / "config.json").is_file()
    steps = [(m, s) for m, s in handler.seen if "pre-training step" in m]
    # About one line per 10% of the build; how many the progress poll catches depends on the machine's speed.
    middle = [(m, s) for m, s in steps if s and 0 < s["done"] < s["total"]]
    assert middle and steps[-1][1]["done"] == steps[-1][1]["total"]
    message, stage = middle[len(middle) // 2]
    assert stage["name"] == "demo_model" and 0 < stage["done"] < stage["total"]
    assert f"step {stage['done']} / {stage['total']}" in message
    assert "demo model ready" in handler.seen[-1][0]
    assert read_status(run_dir).get("stage") is None  # training starts: the stage is over

    # A second run on the same workspace: nothing to build, nothing logged about it.
    handler.seen.clear()
    logger.addHandler(handler)
    try:
        prepare_demo_model(models, run_dir, pretrain_epochs=1)
    finally:
        logger.removeHandler(handler)
    assert not handler.seen


def test_runs_tab_shows_the_stage_as_its_own_progress(tmp_path):
    run_dir = tmp_path / "20260101-000000-demo"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("model_name_or_path: demo\n", encoding="utf-8")
    (run_dir / "status.json").write_text(json.dumps({
        "state": "running", "started_at": 1.0, "max_steps": 60,
        "stage": {"name": "demo_model", "done": 42, "total": 120}}), encoding="utf-8")
    info = InfoReader().read(run_dir, read_status(run_dir))
    texts = {"runs.stage.demo_model": "building the demo model: step {done} / {total} · elapsed {elapsed}",
             "runs.progress": "step {step} / {max_steps} · elapsed {elapsed} · ETA {eta}"}
    html = run_view.progress_html(lambda key, **v: texts[key].format(**v), info, [])
    assert "building the demo model: step 42 / 120" in html and 'value="35.0"' in html
    assert "ETA" not in html
    assert run_view.table_rows([info])[0][4] == "🔧 35%"


def test_background_build_is_skipped_when_the_model_is_ready(workspace):
    from backend.training.model_stage import start_background_build

    assert start_background_build(workspace.models_dir) is None  # the cached build is linked in


def test_a_stop_during_the_build_ends_it_at_once_and_leaves_no_half_model(tmp_path):
    import pytest

    from backend.runs.model_builds import BuildStopped
    from backend.training.model_stage import stopped_during_build

    run_dir, models = tmp_path / "runs" / "r1", tmp_path / "models"
    run_dir.mkdir(parents=True)
    update_status(run_dir, state="running")
    asked = iter([False, False, False, True])
    with pytest.raises(BuildStopped):
        prepare_demo_model(models, run_dir, should_stop=lambda: next(asked), pretrain_epochs=1)
    assert not (models / "demo").exists() and not list(models.glob(".demo-build-*"))  # staging removed
    assert stopped_during_build(run_dir) == 0
    status = read_status(run_dir)
    assert status["state"] == "stopped" and status.get("stage") is None
    assert "start the run again" in status["advice"] and status["advice_message"]["id"] == "train.advice.stopped_in_build"


@pytest.mark.usefixtures("starts_processes")
def test_a_real_first_run_shows_the_build_then_stops_inside_it(tmp_path):
    """A worker on a fresh workspace (no demo model): the stage appears in status.json and the
    Runs tab, train.log says what happens, and Stop ends the run during the build, cleanly."""
    from backend.config_recipes import tiny_config
    from backend.runs.store import RunStore
    from backend.runs.workspace import Workspace
    from tests.polling import wait_for

    store = RunStore(Workspace(tmp_path / "ws").ensure())
    run_id = store.launch(tiny_config(devices="cpu", max_steps=2))
    info = wait_for(lambda: (i := store.get(run_id)).stage and i.stage.get("total") and i, "the build stage")
    assert info.state == "running" and run_view.table_rows([info])[0][4].startswith("🔧")
    store.stop(run_id, grace_s=600)  # the build notices the stop at its next step: no escalation needed
    info = wait_for(lambda: (i := store.get(run_id)).state not in ("queued", "running") and i, "the stopped run")
    assert info.state == "stopped" and info.stage is None and not info.checkpoints
    log = (info.run_dir / "train.log").read_text(encoding="utf-8")
    assert "building the demo model: first use" in log and "stopped while building the demo model" in log
    assert not (store.workspace.models_dir / "demo").exists()


def test_data_check_on_a_fresh_workspace_says_it_builds_the_demo_model(tmp_path, subprocess_env):
    """`python -m backend.data check FILE --model demo` on a workspace without the demo model says on
    stderr that it builds it and how far it is, instead of two silent minutes (stopped once it has)."""
    import subprocess
    import sys

    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"instruction": "Hi", "output": "Hello."}) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "backend.data", "check", str(data), "--model", "demo",
               "--workspace", str(tmp_path / "fresh"), "--json"]
    process = subprocess.Popen(command, env=subprocess_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    lines = []
    try:
        for line in process.stderr:  # ends when the process does: the build finished without a word
            lines.append(line)
            if "pre-training step" in line:
                break
    finally:
        process.kill()
        process.wait()
    said = "".join(lines)
    assert "building the demo model: first use in this workspace" in said, said[-2000:]
    assert "building the demo model: pre-training step" in said, said[-2000:]
