"""The Train tab's view of the run its Start began: the run's bar, with the Plan's step total until
the worker writes its own, and its train loss as a small line.

Its timer ticks only while there is a live run to follow and the Train tab is the one shown: Start
turns it on, the run's end turns it off, and the shell's tab clicks turn it off and on again. So no
tick of it updates a component in a hidden tab (gradio-app/gradio#12904) and an idle page asks
nothing. The line is inline SVG, not a plotly figure, so a tick costs a status read and the new lines
of metrics.jsonl.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gradio as gr

from backend.runs.store import RunError, RunInfo
from backend.training.estimate import planned_steps
from ui.context import UIContext
from ui.texts.train_watch_panel_texts import TEXT  # noqa: F401  (spread into the Train tab's table)
from ui.views import run_view

TICK_S = 3.0
LIVE_STATES = ("queued", "running")


@dataclasses.dataclass
class TrainWatch(run_view.Watch):
    """The Runs tab's Watch plus the Plan's step total, counted once per run."""
    planned: int | None = None

    def follow(self, run_id, run_dir) -> bool:
        switched = super().follow(run_id, run_dir)
        if switched:
            self.planned = None
        return switched


def with_planned_total(ctx: UIContext, watch: TrainWatch, info: RunInfo) -> RunInfo:
    """A run whose worker knows no step total yet (queued, loading, answering replay prompts) shows
    the Plan's instead of "step 0 / ?"."""
    if info.max_steps or info.state not in LIVE_STATES or info.config is None:
        return info
    if watch.planned is None:
        try:
            watch.planned = planned_steps(info.config, ctx.workspace)
        except Exception:  # noqa: BLE001 - a dataset the Plan cannot read: the worker's own total comes later
            watch.planned = 0
    return dataclasses.replace(info, max_steps=watch.planned) if watch.planned else info


def view(ctx: UIContext, lang: str | None, watch: Any, run_id: str | None) -> list:
    """[watch, the view's HTML, the timer]: the timer stays on while the run is live."""
    watch = watch if isinstance(watch, TrainWatch) else TrainWatch()
    if not run_id:
        return [watch, "", gr.Timer(active=False)]
    try:
        info = ctx.store.get(run_id)
    except RunError:
        return [watch, "", gr.Timer(active=False)]
    watch.follow(run_id, info.run_dir)
    watch.read_new()
    info = with_planned_total(ctx, watch, info)
    msg = lambda key, **values: ctx.msg(lang, key, **values)  # noqa: E731
    state = msg(f"runs.state.{info.state}") if f"runs.state.{info.state}" in ctx.texts else info.state
    html = (f'<div id="train-watch-run">{msg("train.watch.title", run=run_id, state=state)}</div>'
            f"{run_view.progress_html(msg, info, watch.records)}{loss_line(msg, watch.records)}")
    return [watch, html, gr.Timer(active=info.state in LIVE_STATES)]


def loss_line(msg, records: list[dict], width: int = 360, height: int = 56) -> str:
    """The train loss as a small inline SVG polyline with its first and last value, or "" before
    two logged steps. A NaN loss is no point."""
    points = [(r["step"], r["loss"]) for r in records
              if r.get("kind") == "train" and isinstance(r.get("loss"), (int, float)) and r["loss"] == r["loss"]]
    if len(points) < 2:
        return ""
    first_step, last_step = points[0][0], points[-1][0]
    low, high = min(y for _, y in points), max(y for _, y in points)
    x_span, y_span = max(last_step - first_step, 1), max(high - low, 1e-9)
    line = " ".join(f"{(x - first_step) / x_span * (width - 4) + 2:.1f},{(high - y) / y_span * (height - 4) + 2:.1f}"
                    for x, y in points)
    caption = msg("train.watch.loss", first=f"{points[0][1]:.3g}", last=f"{points[-1][1]:.3g}", points=len(points))
    return (f'<svg id="train-watch-loss" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'role="img"><polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{line}"/></svg>'
            f'<div id="train-watch-caption">{caption}</div>')


def build(ctx: UIContext) -> dict:
    """The view under the Train tab's buttons; its "run" State is the run id the view follows (Start
    writes it, then calls `follow`)."""
    private = {"api_visibility": "private"}
    parts = {"box": gr.HTML(elem_id="train-watch"), "run": gr.State(None), "watch": gr.State(None),
             "timer": gr.Timer(TICK_S, active=False)}
    parts["timer"].tick(*_tick(ctx, parts), show_progress="hidden", trigger_mode="always_last", **private)
    ctx.after_tabs.append(lambda tabs: _wire_tabs(tabs, parts["run"], parts["timer"]))
    return parts


def follow(ctx: UIContext, parts: dict, started) -> None:
    """After `started` (the Start click's event, which wrote parts["run"]): draw the view at once."""
    started.then(*_tick(ctx, parts), show_progress="hidden", api_visibility="private")


def _tick(ctx: UIContext, parts: dict) -> tuple:
    return (lambda lang, w, r: view(ctx, lang, w, r), [ctx.lang, parts["watch"], parts["run"]],
            [parts["watch"], parts["box"], parts["timer"]])


def _wire_tabs(tabs: dict, run, timer) -> None:
    """Shown again: tick while a run is followed (the first tick turns it off if the run ended);
    another tab: stop ticking."""
    private = {"api_visibility": "private"}
    for name, tab in tabs.items():
        on = name == "train"
        tab.select(lambda r, on=on: gr.Timer(active=on and bool(r)), run, timer, show_progress="hidden", **private)
