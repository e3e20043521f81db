"""The time estimate before Start: in the Plan and in --dry-run, with its source and range; from this
machine's earlier runs of the settings (a), else a speed probe (b), else the FLOPs guess (c); and
summary.json's estimate beside the actual seconds. Real runs on the demo model, a real probe process."""

from __future__ import annotations

import json
import os
import socket

import psutil
import pytest

from backend.config import RunConfig
from backend.config_recipes import tiny_config
from backend.runs.files import update_status
from backend.runs.speed_log import matching_records, profile_seconds
from backend.runs.workspace import Workspace
from backend.storage.atomic_files import read_json
from backend.train import main as train_main
from backend.training.estimate import DEVICE_RATE_FILE, estimate_run_seconds
from ui import forms
from ui.context import UIContext
from ui.i18n import localize, merge_texts
from ui.panels import estimate_panel
from ui.tabs import runs, train

pytestmark = pytest.mark.timeout(1800)


def ctx_for(workspace: Workspace) -> UIContext:
    return UIContext(workspace=workspace, texts=merge_texts(train.TEXT, runs.TEXT), i18n=None)


def browser_values(config: RunConfig) -> list:
    kinds = {s.name: s.widget for s in forms.ALL_FIELDS}
    return [float(v) if kinds.get(n) in ("number", "slider") and isinstance(v, int) and not isinstance(v, bool) else v
            for n, v in zip(forms.NAMES, forms.form_values(config))]


def test_the_plan_estimates_from_the_machines_own_run_of_these_settings(short_demo_run, device_dicts):
    """(a): the run recorded its speed at its end; the Plan for the same settings (another learning rate
    and length) says so, and for the run's own steps the estimate gives back the run's own seconds."""
    workspace = Workspace(short_demo_run.parent.parent)
    config = RunConfig.load(short_demo_run / "config.yaml")
    record = next(r for r in matching_records(workspace.root, config, source="run")
                  if r["run_id"] == short_demo_run.name)
    assert record["profile"]["step"] > 0 and record["profile"]["event"] is not None  # saves at 8 and 16
    summary = read_json(short_demo_run / "summary.json")
    # Taken apart and put back together for its own 24 steps, the profile gives the run's own seconds.
    assert profile_seconds(record["profile"], config, 24, True) == pytest.approx(summary["wall_time_s"], rel=0.05)
    estimate = estimate_run_seconds(config, workspace, total_steps=24)
    assert estimate.source == "runs" and estimate.seconds_low < estimate.seconds_mid < estimate.seconds_high
    # The run started with an estimate (the FLOPs guess: nothing was measured in its workspace before it).
    assert summary["estimate"]["source"] == "flops" and summary["estimate"]["actual_s"] == summary["wall_time_s"]
    assert summary["estimate"]["error"] == pytest.approx(summary["estimate"]["seconds_mid"] / summary["wall_time_s"] - 1,
                                                         abs=1e-3)
    longer = RunConfig.from_dict({**config.to_dict(), "max_steps": 48, "learning_rate": 1e-3})
    text = estimate_panel.time_text(ctx_for(workspace), "en", "demo", "demo", device_dicts, *browser_values(longer))
    assert "48 steps" in text and "run(s) of these settings measured on this machine" in text
    assert profile_seconds(record["profile"], longer, 48, True) > summary["wall_time_s"]  # twice the steps
    other = RunConfig.from_dict({**config.to_dict(), "lora_r": config.lora_r * 2})  # another step shape
    assert estimate_run_seconds(other, workspace).source == "flops"


@pytest.mark.usefixtures("starts_processes")
def test_fresh_workspace_flops_guess_then_measure_speed_gives_the_probe(workspace, device_dicts):
    """(c) on a workspace that measured nothing, in both languages; Measure speed runs the real probe in
    its own process (a background job) and the Plan then shows (b) with the probe's time."""
    ctx = ctx_for(workspace)
    values = browser_values(tiny_config(max_steps=12, devices="cpu"))
    text = estimate_panel.time_text(ctx, "en", "demo", "demo", device_dicts, *values)
    assert "Roughly" in text and "GFLOPs a token" in text and "Measure speed" in text and "12 steps" in text
    assert "粗略" in estimate_panel.time_text(ctx, "zh", "demo", "demo", device_dicts, *values)
    said = list(estimate_panel.measure(ctx, "en", "demo", "demo", device_dicts, *values))
    assert "in a separate process" in said[0][0]
    message, time_text = said[-1]
    assert message.startswith("Speed probe:"), message
    assert "as a speed probe of 6 steps measured at" in time_text and "12 steps" in time_text
    (record,) = matching_records(workspace.root, tiny_config(max_steps=12, devices="cpu"), source="probe")
    assert record["profile"]["event"] is not None  # the probe's save + evaluation halfway was timed
    assert not [p for p in workspace.runs_dir.iterdir() if p.is_dir()]  # a probe is not a run
    assert not list((workspace.root / "speed" / "probes").glob("*/"))  # its scratch folder is gone


def test_measure_speed_is_refused_while_a_run_holds_the_devices(workspace, device_dicts):
    held = workspace.runs_dir / "20260101-000000-busy"
    held.mkdir()
    me = psutil.Process()  # a live process: this one stands for the running worker
    update_status(held, state="running", run_id=held.name, pid=os.getpid(), create_time=me.create_time(),
                  launcher_create_time=me.create_time(), devices=["cpu"], command=["x"])
    ctx = ctx_for(workspace)
    said = list(estimate_panel.measure(ctx, "en", "demo", "demo", device_dicts,
                                       *browser_values(tiny_config(devices="cpu"))))
    assert len(said) == 1 and "cpu is busy with run 20260101-000000-busy" in said[0][0]
    assert not (workspace.root / "speed" / "jobs").exists()  # nothing was started


def test_a_busy_machine_scales_the_measured_cpu_rate_and_widens_the_range(workspace):
    """The CPU rate measured at load 0.3 on 2 cores, the estimate made at load 11: the FLOPs guess takes
    the share of the cores a run gets now (1/6), its range is twice as wide each way and it says the
    machine is busy. It then holds what such a run took (53 s where the idle figure said 4 s)."""
    rate = workspace.root / DEVICE_RATE_FILE
    rate.parent.mkdir(parents=True, exist_ok=True)
    rate.write_text(json.dumps({socket.gethostname(): {"tflops": 0.05, "load": 0.3}}), encoding="utf-8")
    config = tiny_config(max_steps=12, devices="cpu")
    idle = estimate_run_seconds(config, workspace, load=(0.3, 2))
    busy = estimate_run_seconds(config, workspace, load=(11.0, 2))
    assert idle.source == busy.source == "flops" and not idle.busy and "busy" not in str(idle.message())
    assert busy.seconds_mid == pytest.approx(6 * idle.seconds_mid)  # 2 cores shared by 12 runnable processes
    assert busy.seconds_low <= 53 / 4 * idle.seconds_mid <= busy.seconds_high
    assert busy.seconds_high / busy.seconds_mid == pytest.approx(2 * idle.seconds_high / idle.seconds_mid)
    said = str(busy.message())
    assert said.startswith("Roughly") and "The machine is busy (load 11.0 on 2 cores): the figure is uncertain" in said
    assert "本机正忙（2 个核心上负载 11.0）" in localize(busy.message(), "zh")
    # A rate kept without the load it was measured at is measured again, and kept with it.
    rate.write_text(json.dumps({socket.gethostname(): 123.0}), encoding="utf-8")
    estimate_run_seconds(config, workspace, load=(0.3, 2))
    kept = read_json(rate)[socket.gethostname()]
    assert kept["tflops"] != 123.0 and isinstance(kept["load"], float)


def test_dry_run_prints_steps_and_estimate_and_starts_nothing(workspace, capsys):
    code = train_main(["--recipe", "demo-tiny", "--set", "max_steps=8", "--workspace", str(workspace.root),
                       "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0 and "steps: 8 optimizer steps" in out
    assert "time: Roughly" in out and "GFLOPs a token" in out
    assert not [p for p in workspace.runs_dir.iterdir() if p.is_dir()]
    code = train_main(["--recipe", "demo-tiny", "--set", "lora_r=0", "--workspace", str(workspace.root), "--dry-run"])
    assert code == 2 and "lora_r" in capsys.readouterr().err  # a bad config: the start's own sentence
