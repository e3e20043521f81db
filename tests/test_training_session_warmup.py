"""A short run learns from its first optimizer step: transformers' schedulers run a warmup's first
step at learning rate 0, so a run of a few steps (a handful of vote pairs) trains without warmup;
a long run keeps the warmup its warmup_ratio asks for. Through the real worker on the demo model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backend.config import WARMUP_MIN_STEPS, RunConfig, derived_numbers
from backend.config_recipes import tiny_config

REPO = Path(__file__).resolve().parents[1]


def test_warmup_steps_are_none_below_the_minimum_and_the_trainers_count_above():
    five_steps = RunConfig(per_device_train_batch_size=1, gradient_accumulation_steps=1, warmup_ratio=0.3,
                           num_train_epochs=1)
    assert derived_numbers(RunConfig(max_steps=WARMUP_MIN_STEPS - 1, warmup_ratio=0.3), 8)["warmup_steps"] == 0
    assert derived_numbers(RunConfig(max_steps=WARMUP_MIN_STEPS, warmup_ratio=0.3), 8)["warmup_steps"] == 6
    assert derived_numbers(RunConfig(max_steps=100), 8)["warmup_steps"] == 5   # ceil(0.05 x 100), as transformers
    assert derived_numbers(five_steps, 5)["warmup_steps"] == 0   # 5 rows, 1 epoch: 5 steps


def test_the_plan_says_a_short_run_has_no_warmup(workspace):
    from backend.models.hardware import as_dicts, detect_devices
    from ui import forms
    from ui.context import UIContext
    from ui.i18n import merge_texts
    from ui.tabs import runs, train

    ctx = UIContext(workspace=workspace, texts=merge_texts(train.TEXT, runs.TEXT), i18n=None)
    rows, devices = train.count_rows(ctx, "demo"), as_dicts(detect_devices())
    short, long = tiny_config(max_steps=5, devices="cpu"), tiny_config(max_steps=40, devices="cpu")
    derived = train.plan(ctx, "en", "demo", "demo", rows, devices, *forms.form_values(short))[0]
    assert "**0** warmup steps" in derived and f"No warmup: a run of fewer than {WARMUP_MIN_STEPS} steps" in derived
    assert "不预热" in train.plan(ctx, "zh", "demo", "demo", rows, devices, *forms.form_values(short))[0]
    derived = train.plan(ctx, "en", "demo", "demo", rows, devices, *forms.form_values(long))[0]
    assert "**2** warmup steps" in derived and "No warmup" not in derived   # ceil(0.05 x 40)


@pytest.mark.slow
def test_a_short_runs_first_step_learns(workspace, subprocess_env):
    from backend.models.demo_facts import build_demo_rows

    data = workspace.root / "four.jsonl"
    data.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in build_demo_rows()[:4]))
    config, run_dir = workspace.root / "run.yaml", workspace.runs_dir / "short"
    # 3 steps at warmup_ratio 0.3: the Trainer would warm up for ceil(0.9) = 1 step, at learning rate 0.
    tiny_config(dataset=str(data), max_steps=3, per_device_train_batch_size=4, cutoff_len=64, val_size=0.0,
                logging_steps=1, warmup_ratio=0.3, save_steps=3).save(config)
    result = subprocess.run([sys.executable, "-m", "backend.train", "--workspace", str(workspace.root),
                             "--config", str(config), "--run-dir", str(run_dir)],
                            cwd=REPO, env=subprocess_env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    logged = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    first = next(r for r in logged if r["kind"] == "train" and r["step"] == 1)
    assert first["learning_rate"] > 0
    history = json.loads((run_dir / "checkpoint-3" / "trainer_state.json").read_text())["log_history"]
    assert next(h for h in history if h.get("step") == 1 and "loss" in h)["learning_rate"] == pytest.approx(3e-3)
    log = (run_dir / "train.log").read_text()
    assert f"warmup: none (warmup_ratio 0.3 of 3 steps; a run of fewer than {WARMUP_MIN_STEPS} steps" in log
