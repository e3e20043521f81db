"""Runs tab handlers against real worker processes: the monitor tails
metrics.jsonl incrementally and charts it, a killed run shows as lost and
resumes through the tab with its whole history, a failed run puts its error
and advice at the top, and Compare overlays runs and lists config differences."""

from __future__ import annotations

import json
import os
import signal
import time

import gradio as gr
import pytest

from backend.config_recipes import tiny_config
from backend.runs import queue
from backend.runs.files import METRICS_FILE, list_checkpoints, read_status
from tests.polling import wait_for
from ui import forms, run_actions
from ui.tabs import runs, train
from ui.views import charts, run_view

# [watch, alert, progress, resume visible, log, *figures]
WATCH, ALERT, PROGRESS, RESUME, LOG, FIGS = 0, 1, 2, 3, 4, 5


def start(ctx, **settings) -> str:
    config = tiny_config(devices="cpu", per_device_train_batch_size=4, logging_steps=1, **settings)
    message, run_id = train.start(ctx, "en", config.model_name_or_path, config.dataset, *forms.form_values(config))
    assert run_id, message
    return run_id


def file_records(run_dir) -> list[dict]:
    """Every complete record of the file (a line torn by the kill is skipped, as the tail does)."""
    records = []
    for line in (run_dir / METRICS_FILE).read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def test_smoothing_and_heatmap_shapes_by_hand():
    assert charts.smooth([1.0, 3.0], 0.5) == [1.0, pytest.approx((0.25 + 0.5 * 3) / 0.75)]
    records = [{"step": 1, "kind": "train", "grad_norms": {"attn": [1, 2], "mlp": [3, 4], "other": 0.1}},
               {"step": 2, "kind": "train", "grad_norms": {"attn": [5, 6], "mlp": [7, 8], "other": 0.1}}]
    assert charts.grad_norm_matrix(records) == ([1, 2], ["attn 0", "attn 1", "mlp 0", "mlp 1"],
                                                [[1, 5], [2, 6], [3, 7], [4, 8]])


@pytest.mark.slow
def test_monitor_follows_a_real_run_that_is_killed_then_a_failed_one(ctx):
    run_id = start(ctx, max_steps=12, save_steps=2, eval_steps=2, val_size=0.2, run_name="watched")
    said, waiting = train.start(ctx, "en", "demo", "demo", *forms.form_values(tiny_config(devices="cpu")))
    assert waiting and f"queued behind run **{run_id}**" in said  # one job per device: the second one waits
    queue.cancel(ctx.store, waiting)  # this test watches the first run alone
    rows, ids, watched = runs.list_runs(ctx)
    assert sorted(ids) == sorted([run_id, waiting]) and watched == run_id and rows[ids.index(run_id)][3] == "lora"

    store = ctx.store
    run_dir = store.get(run_id).run_dir
    watch, seen = None, []
    while not list_checkpoints(run_dir):  # tick like the timer until the first checkpoint is complete
        out = runs.tick(ctx, "en", watch, run_id)
        watch = out[WATCH]
        seen.append(len(watch.records))
        assert store.get(run_id).state in ("queued", "running"), store.get(run_id).error
        time.sleep(0.3)
    os.killpg(store.get(run_id).pid, signal.SIGKILL)  # the worker dies without a word
    wait_for(lambda: store.get(run_id).state == "lost", "the run to be seen as lost")
    out = runs.tick(ctx, "en", watch, run_id)
    watch = out[WATCH]
    # The watcher never lost or duplicated a record: it holds exactly the file's complete lines.
    assert watch.records == file_records(run_dir) and seen == sorted(seen)
    assert "This run was lost" in out[ALERT] and "Resume continues from checkpoint-" in out[ALERT]
    rows, ids, _ = runs.list_runs(ctx)
    assert out[RESUME]["visible"] is True and "lost" in rows[ids.index(run_id)][1]

    fresh = runs.tick(ctx, "en", None, run_id)  # a page refresh: a new session sees the whole history
    assert fresh[WATCH].records == watch.records
    loss, lr, grad, tokens, memory, layers, rewards, accuracy = fresh[FIGS:]
    # An sft run: no preference charts (hidden rather than drawn empty).
    assert rewards == accuracy == gr.update(visible=False)
    assert [t.name for t in loss.data] == ["train loss", "train loss (smoothed)", "eval loss"]
    steps = [r["step"] for r in watch.records if r.get("kind") == "train" and "loss" in r]
    assert list(loss.data[0].x) == steps and 2 in list(loss.data[2].x)
    assert len(lr.data[0].y) == len(steps) == len(grad.data[0].y) and min(tokens.data[0].y) > 0
    assert any(t.name == "rss" for t in memory.data)
    n_layers = json.loads((ctx.workspace.models_dir / "demo" / "config.json").read_text())["num_hidden_layers"]
    assert list(layers.data[0].y) == [f"{part} {i}" for part in ("attn", "mlp") for i in range(n_layers)]

    # Nothing new: no figure is rebuilt.
    again = runs.tick(ctx, "en", watch, run_id)
    assert all(f == gr.skip() for f in again[FIGS:])

    failed = start(ctx, dataset="no-such-dataset", max_steps=3)
    wait_for(lambda: store.get(failed).state not in ("queued", "running"), "the worker to fail")
    out = runs.tick(ctx, "en", None, failed)
    assert out[ALERT].startswith("❌ **This run failed:**") and "no-such-dataset" in out[ALERT]
    assert "pick a dataset saved in the Data tab" in out[ALERT]  # the worker's advice, at the top

    note, figure, table = runs.compare(ctx, "en", [run_id, failed])
    assert {t.name for t in figure.data} == {f"{run_id} train", f"{run_id} eval"}
    settings = {row[0]: row[1:] for row in table["data"]}
    assert settings["dataset"] == ["demo", "no-such-dataset"] and settings["max_steps"] == ["12", "3"]
    assert table["headers"] == ["setting", run_id, failed] and note == ""
    assert "at least two" in runs.compare(ctx, "en", [failed])[0]

    # Only new bytes are read: a tail that re-read the file would now see the scrambled prefix.
    path = run_dir / METRICS_FILE
    path.write_bytes(b"x" * (path.stat().st_size - 1) + b"\n")
    with open(path, "a") as handle:
        handle.write(json.dumps({"time": time.time(), "step": 99, "kind": "train", "loss": 0.5}) + "\n")
    count = len(watch.records)
    out = runs.tick(ctx, "en", watch, run_id)
    assert out[WATCH].records[-1]["step"] == 99 and len(out[WATCH].records) == count + 1
    assert out[FIGS].data[0].x[-1] == 99


def test_eta_uses_the_current_session_only():
    records = [{"kind": "train", "time": 0, "step": 1}, {"kind": "train", "time": 100, "step": 2},
               {"kind": "system", "event": "resume", "time": 500, "step": 2},
               {"kind": "train", "time": 510, "step": 3}, {"kind": "train", "time": 530, "step": 5}]
    assert run_view.eta_seconds(records, 10) == pytest.approx(50)  # 10 s per step, 5 steps left


def test_stop_and_resume_buttons_say_why_they_cannot_act(ctx):
    """Train and Runs share these handlers (ui/run_actions.py) and the app's one store (ctx.store)."""
    from ui import run_actions

    assert "No run to act on" in run_actions.stop(ctx, "en", None)
    assert "没有可操作的运行" in run_actions.resume(ctx, "zh", "")
    run_id = ctx.store.create(tiny_config(devices="cpu"))
    assert run_actions.stop(ctx, "en", run_id) == f"❌ Run {run_id} is not running (state: queued)."
    assert run_actions.resume(ctx, "en", "../etc").startswith("❌ No run named '../etc'")


@pytest.mark.slow
def test_stop_before_the_first_step_says_the_run_ends_now_and_it_does(ctx):
    """Stop on a run that has loaded but not begun a step: the sentence says it ends without a checkpoint,
    and the worker ends by itself, stopped with nothing saved (its own advice: a kill after the grace period
    would leave the store's)."""
    run_id = ctx.store.create(tiny_config(devices="cpu", max_steps=4, save_steps=2,
                                          callbacks=["tests.callback_runs:HoldBeforeFirstStep"]))
    run_dir = ctx.store.runs_dir / run_id
    (run_dir / ".hold-start").touch()
    ctx.store.start(run_id)
    try:
        wait_for(lambda: (run_dir / ".held-start").exists() or not ctx.store.get(run_id).live, "the worker to hold")
        said = run_actions.stop(ctx, "en", run_id)
        assert said == (f"⏹ Stopping run **{run_id}**: it has not begun its first training step, so there is "
                        "nothing to save: it ends now, without a checkpoint.")
        info = wait_for(lambda: (i := ctx.store.get(run_id)).state not in ("queued", "running") and i, "the end")
        status = read_status(run_dir)
        assert info.state == "stopped" and not info.checkpoints, (run_dir / "train.log").read_text()[-3000:]
        assert status["exit_code"] == 0 and status["advice_message"]["id"] == "train.advice.stopped_before_first_step"
        assert (run_dir / ".hold-start").exists()  # it ended on the stop, not because the hold ended
    finally:
        (run_dir / ".hold-start").unlink(missing_ok=True)


def test_watch_run_follows_a_run_started_after_the_one_it_shows(ctx):
    """After Stop of one run and Start of the next, "Watch run" kept returning to the stopped run."""
    from backend.runs.files import update_status

    stopped = ctx.store.create(tiny_config(devices="cpu", run_name="stopped"))
    update_status(ctx.store.runs_dir / stopped, state="stopped", ended_at=time.time())
    _, known, watched = runs.list_runs(ctx, stopped)
    assert watched == stopped
    started = ctx.store.create(tiny_config(devices="cpu", run_name="next"))  # queued, as Start leaves it
    _, ids, watched = runs.list_runs(ctx, stopped, known=known)
    assert watched == started
    # Once listed, the user's own pick holds: an older run stays watched.
    assert runs.list_runs(ctx, stopped, known=ids)[2] == stopped

