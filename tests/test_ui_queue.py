"""The queue in the UI (ui/panels/queue_panel.py, the Train tab's Start): a Start on a busy device says
which run it waits behind, the Runs tab lists the queue in order with estimated times, and
Cancel / Up / Down / Start now act on it, in English and Chinese. The device is held by a real
process recorded as a run, so nothing queued here ever starts."""

from __future__ import annotations

import sys
import time

import pytest

from backend.config_recipes import tiny_config
from backend.runs import processes
from backend.runs.files import update_status
from backend.runs.queue import waiting_runs
from ui import forms, run_actions
from ui.panels import queue_panel
from ui.tabs import train


@pytest.fixture
def holder(ctx):
    """A plain process recorded as a running run on the CPU."""
    run_id = ctx.store.create(tiny_config(devices="cpu", run_name="holder"))
    run_dir = ctx.store.runs_dir / run_id
    child = processes.launch_worker([sys.executable, "-c", "import time; time.sleep(600)"], run_dir)
    update_status(run_dir, state="running", pid=child.pid, pgid=child.pid,
                  create_time=processes.create_time(child.pid), started_at=time.time())
    yield run_id
    for waiting in waiting_runs(ctx.store):  # nothing queued here may start once the device is free
        queue_panel.act(ctx, "en", "cancel", waiting)
    child.kill()
    child.wait()


def start(ctx, lang: str, name: str) -> tuple[str, str]:
    config = tiny_config(devices="cpu", run_name=name, max_steps=3)
    message, run_id = train.start(ctx, lang, config.model_name_or_path, config.dataset, *forms.form_values(config))
    assert run_id, message
    return message, run_id


@pytest.mark.usefixtures("starts_processes")
def test_start_on_a_busy_device_queues_and_the_runs_tab_orders_cancels_and_moves(ctx, holder):
    message, first = start(ctx, "en", "first")
    assert f"queued behind run **{holder}**" in message and first in message
    message, second = start(ctx, "zh", "second")
    assert f"已排在运行 **{first}** 之后" in message

    summary, table, waiting, picked = queue_panel.queue_view(ctx, "en")
    assert waiting == [first, second] and picked == first
    assert table["headers"][:3] == ["#", "run", "state"] and "estimated start" in table["headers"]
    assert [row[:5] for row in table["data"]] == [[1, first, "waiting", "cpu", holder], [2, second, "waiting", "cpu", first]]
    for row in table["data"]:  # a clock time, or "unknown" while the holder's end is not known
        assert row[5] == "unknown" or ":" in row[5]
    assert "**Queue:** 2 waiting, 0 running" in summary

    assert queue_panel.act(ctx, "en", "up", second) == f"**{second}** is now number 1 in the queue."
    assert queue_panel.queue_view(ctx, "en", picked=first)[2:] == ([second, first], first)
    assert queue_panel.act(ctx, "en", "up", None) == "Pick a queued run first."
    refused = queue_panel.act(ctx, "zh", "start_now", first, "7")
    assert refused.startswith("❌") and "cuda:7" in refused and "没有" in refused
    busy = queue_panel.act(ctx, "en", "start_now", first, "")
    assert f"cpu is busy with run {holder}" in busy

    assert queue_panel.act(ctx, "en", "cancel", second) == f"Cancelled **{second}**: it left the queue."
    assert "不在队列中等待" in queue_panel.act(ctx, "zh", "down", second)
    summary, _, waiting, picked = queue_panel.queue_view(ctx, "zh", picked=second)
    assert waiting == [first] and picked == first  # the cancelled run is no longer offered
    assert "1 个等待" in summary and "1 个停止或取消" in summary
    assert run_actions.stop(ctx, "en", first) == (f"⏹ Run **{first}** was waiting in the queue: cancelled, "
                                                  "it never started.")
    assert waiting_runs(ctx.store) == [] and ctx.store.get(first).state == "stopped"


def test_an_empty_queue_says_how_runs_get_there(ctx):
    summary, table, waiting, picked = queue_panel.queue_view(ctx, "en")
    assert summary.startswith("The queue is empty") and waiting == [] and picked is None
    assert table["data"] == [[""] * len(queue_panel.COLUMNS)]
    assert queue_panel.clock(lambda key, **v: queue_panel.TEXT[key]["en"].format(**v), None, time.time()) == "unknown"
