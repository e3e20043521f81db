"""The Train tab's view of the run it started (the run chosen on the page): the Runs tab's bar, so a
stage before training says what it does or waits for with its count, with the Plan's step total
until the worker knows its own (not "step 0 / ?"), and a small loss chart under it."""

from __future__ import annotations

import dataclasses

import gradio as gr

from backend.runs.info import RunError
from backend.training.estimate import planned_steps
from ui import charts, run_view
from ui.context import UIContext

TICK_S = 2.0


def _label(en: str, zh: str) -> dict[str, str]:
    return {"en": en, "zh": zh}


TEXT: dict[str, dict[str, str]] = {
    "train.progress.loss": _label("Loss of the run started here", "此处开始的运行的损失"),
    "train.progress.waiting": _label("Waiting for the first logged step…", "等待第一个记录的步骤…"),
}


def progress_view(ctx: UIContext, lang: str | None, run_id: str | None, watch: run_view.Watch | None,
                  planned: dict | None) -> list:
    """[watch, bar HTML, loss chart, planned]: `planned` keeps the Plan's step total of the run shown
    ({"run", "steps"}), counted once per run."""
    watch = watch if isinstance(watch, run_view.Watch) else run_view.Watch()
    if not run_id:
        return [watch, "", gr.skip(), planned]
    try:
        info = ctx.store.get(run_id)
    except RunError:
        return [watch, "", gr.skip(), planned]
    if not planned or planned.get("run") != run_id:
        planned = {"run": run_id, "steps": _planned(ctx, info)}
    if not info.max_steps and planned["steps"]:  # the worker writes its own once it trains
        info = dataclasses.replace(info, max_steps=planned["steps"])
    switched = watch.follow(run_id, info.run_dir)
    new = watch.read_new()
    msg = lambda key, **values: ctx.msg(lang, key, **values)  # noqa: E731 - run_view's Msg
    figure = (charts.loss_figure(watch.records, msg("train.progress.loss"), msg("train.progress.waiting"))
              if new or switched else gr.skip())
    return [watch, run_view.progress_html(msg, info, watch.records), figure, planned]


def _planned(ctx: UIContext, info) -> int | None:
    try:
        return planned_steps(info.config, ctx.workspace) if info.config else None
    except Exception:  # noqa: BLE001 - a dataset that cannot be read: the worker's own total comes later
        return None


def build(ctx: UIContext, run_id) -> None:
    """The bar and the chart, placed where it is called, following `run_id` (the shared run)."""
    bar = gr.HTML(elem_id="train-progress")
    plot = gr.Plot(label=ctx.t("train.progress.loss"), elem_id="train-loss-chart")
    watch, planned = gr.State(None), gr.State(None)

    def do_view(lang, run, watching, steps):
        return progress_view(ctx, lang, run, watching, steps)

    gr.Timer(TICK_S).tick(do_view, [ctx.lang, run_id, watch, planned], [watch, bar, plot, planned],
                          show_progress="hidden", trigger_mode="always_last", api_visibility="private")
