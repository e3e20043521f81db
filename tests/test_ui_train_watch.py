"""The Train tab's view of the run Start began (ui/panels/train_watch_panel.py): the Plan's step
total before the worker writes its own, the loss line from metrics.jsonl, a timer that stops with
the run, and tab clicks that turn it off and on."""

from __future__ import annotations

import json
import time

from backend.config_recipes import tiny_config
from backend.runs.files import METRICS_FILE, update_status
from backend.training.estimate import planned_steps
from ui.panels import train_watch_panel as panel
from ui.shell import build_app

WATCH, HTML, TIMER = 0, 1, 2


def test_the_view_shows_the_plans_total_then_the_workers_steps_and_stops_ticking_at_the_end(ctx):
    config = tiny_config(devices="cpu", max_steps=-1, num_train_epochs=2.0)  # epochs: the worker counts the steps
    run_id = ctx.store.create(config)  # queued, as Start leaves it before the worker writes a total
    total = planned_steps(config, ctx.workspace)
    shown = panel.view(ctx, "en", None, run_id)
    assert f"Run <b>{run_id}</b>: queued" in shown[HTML] and f"step 0 / {total} ·" in shown[HTML]
    assert "/ ?" not in shown[HTML] and "<svg" not in shown[HTML]  # no logged step: no line
    assert shown[TIMER].active is True

    run_dir = ctx.store.runs_dir / run_id
    update_status(run_dir, state="running", global_step=3, max_steps=total + 1)
    with open(run_dir / METRICS_FILE, "a", encoding="utf-8") as handle:
        for step, loss in ((1, 2.5), (2, 2.0), (3, float("nan")), (4, 1.5)):
            handle.write(json.dumps({"time": time.time(), "step": step, "kind": "train", "loss": loss}) + "\n")
    shown = panel.view(ctx, "zh", shown[WATCH], run_id)
    assert f"运行 <b>{run_id}</b>" in shown[HTML] and f"第 3 / {total + 1} 步" in shown[HTML]  # the worker's total
    points = shown[HTML].split('points="')[1].split('"')[0].split()
    assert len(points) == 3 and "2.5 → 1.5，共 3 个记录步" in shown[HTML]  # the NaN step is no point
    assert shown[TIMER].active is True

    update_status(run_dir, state="completed", global_step=total + 1, ended_at=time.time())
    shown = panel.view(ctx, "en", shown[WATCH], run_id)
    assert f"step {total + 1} / {total + 1}" in shown[HTML] and shown[TIMER].active is False
    assert len(shown[WATCH].records) == 4  # read once each, not again per tick


def test_no_run_or_an_unknown_one_shows_nothing_and_does_not_tick(ctx):
    for run_id in (None, "no-such-run"):
        shown = panel.view(ctx, "en", None, run_id)
        assert shown[HTML] == "" and shown[TIMER].active is False


def test_every_tab_click_sets_the_views_timer_on_only_for_the_train_tab(workspace):
    """The shell wires each tab's select to the view's timer: the Train tab turns it on (for a followed
    run), any other tab off, so no tick of it draws into a hidden tab."""
    demo = build_app(workspace)
    timers = [block for block in demo.blocks.values() if type(block).__name__ == "Timer"]
    tab_ids = {block._id: block.id for block in demo.blocks.values() if type(block).__name__ == "Tab"}
    selects = {}
    for dep in demo.fns.values():
        for target_id, event in dep.targets:
            if event == "select" and target_id in tab_ids and len(dep.outputs) == 1:
                output = demo.blocks[dep.outputs[0]._id] if hasattr(dep.outputs[0], "_id") else dep.outputs[0]
                if output in timers:
                    selects[tab_ids[target_id]] = dep.fn
    assert set(selects) == set(tab_ids.values())
    assert selects["train"]("run-1").active is True and selects["train"](None).active is False
    assert all(fn("run-1").active is False for name, fn in selects.items() if name != "train")
