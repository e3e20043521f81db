"""The demo model's first build is a stage of the run: train.log lines, a
`stage` in status.json and a progress bar in the Runs tab, instead of an empty
log and "step 0 / 60 · ETA -" for two minutes."""

from __future__ import annotations

import json
import logging

from backend.run_files import read_status, update_status
from backend.run_info import InfoReader
from backend.training.demo_stage import prepare_demo_model
from ui import run_view


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
    assert len(steps) >= 5  # about one line per 10%
    message, stage = steps[len(steps) // 2]
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
    from backend.training.demo_stage import start_background_build

    assert start_background_build(workspace.models_dir) is None  # the cached build is linked in
