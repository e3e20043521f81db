"""The Runs tab's queue: the runs that wait for their devices, in the order they will start,
with each one's estimated start and end, and Cancel / Up / Down / Start now.

Everything comes from backend/runs/queue.py (the queue lives in the run folders);
this module only formats and wires. Handlers are plain functions
(tests/test_ui_queue.py).
"""

from __future__ import annotations

import time

from backend.runs import queue
from backend.runs.info import RunError
from backend.training.estimate import estimate_run_seconds
from ui.context import UIContext
from ui.i18n import localize
from ui.texts.queue_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)

TICK_S = 5.0
COLUMNS = ("position", "run", "state", "devices", "behind", "start", "end", "source")
ACTIONS = ("cancel", "up", "down", "start_now")


TEXT["runs.queue.done.down"] = TEXT["runs.queue.done.up"]


def _msg(ctx: UIContext, lang: str | None):
    return lambda key, **values: ctx.msg(lang, key, **values)


def clock(msg, at: float | None, now: float) -> str:
    """'16:40 (in 12 min)', or the date too when it is not today; 'unknown' for None."""
    if at is None:
        return msg("runs.queue.unknown")
    local, today = time.localtime(at), time.localtime(now)
    shown = time.strftime("%H:%M" if local[:3] == today[:3] else "%Y-%m-%d %H:%M", local)
    if at <= now:
        return shown
    return msg("runs.queue.in", clock=shown, wait=_span(at - now))


def _span(seconds: float) -> str:
    minutes = round(seconds / 60)
    if minutes < 1:
        return "<1 min"
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes / 60:.1f} h"


def source_text(msg, source: str) -> str:
    key = f"runs.queue.source.{source}"
    return msg(key) if key in TEXT else source


def summary_text(msg, lang: str | None, summary: queue.QueueSummary) -> str:
    if not (summary.waiting or summary.running or summary.completed or summary.stopped or summary.failed):
        return msg("runs.queue.empty")
    lines = [msg("runs.queue.summary", waiting=summary.waiting, running=summary.running,
                 completed=summary.completed, stopped=summary.stopped, failed=len(summary.failed))]
    lines += [msg("runs.queue.failed_run", run_id=run_id, error=localize(error, lang) or "")
              for run_id, error in summary.failed]
    return "\n\n".join(lines)


def queue_view(ctx: UIContext, lang: str | None, picked: str | None = None) -> tuple[str, dict, list[str], str | None]:
    """(summary, table value, waiting run ids, the run picked: kept while it still waits)."""
    msg, now = _msg(ctx, lang), time.time()
    entries = queue.queue_order(ctx.store, estimate=estimate_run_seconds)
    rows = [[entry.position or "", entry.info.run_id,
             msg("runs.queue.waiting" if entry.position else "runs.queue.running"),
             ", ".join(entry.info.devices), entry.waiting_behind or "",
             clock(msg, entry.estimated_start, now), clock(msg, entry.estimated_end, now),
             source_text(msg, entry.estimate_source)]
            for entry in entries]
    waiting = [e.info.run_id for e in entries if e.position]
    table = {"headers": [msg(f"runs.queue.col.{c}") for c in COLUMNS], "data": rows or [[""] * len(COLUMNS)]}
    picked = picked if picked in waiting else (waiting[0] if waiting else None)
    return summary_text(msg, lang, queue.queue_summary(ctx.store)), table, waiting, picked


def act(ctx: UIContext, lang: str | None, action: str, run_id: str | None, devices: str | None = None) -> str:
    """Cancel, move up / down, or start now the picked waiting run; the sentence to show."""
    msg = _msg(ctx, lang)
    if not run_id:
        return msg("runs.queue.none_picked")
    try:
        if action == "cancel":
            queue.cancel(ctx.store, run_id)
            return msg("runs.queue.done.cancel", run_id=run_id)
        if action in ("up", "down"):
            position = queue.move(ctx.store, run_id, action)
            return msg(f"runs.queue.done.{action}", run_id=run_id, position=position)
        queue.start_now(ctx.store, run_id, (devices or "").strip() or None)
        return msg("runs.queue.done.start_now", run_id=run_id)
    except RunError as error:
        return msg("runs.queue.error", error=localize(error, lang))


def build(ctx: UIContext) -> None:
    """The queue's accordion in the Runs tab."""
    import gradio as gr

    private = {"api_visibility": "private"}
    with gr.Accordion(ctx.t("runs.queue.title"), open=True, elem_id="runs-queue"):
        summary = gr.Markdown(elem_id="runs-queue-summary")
        table = gr.Dataframe(headers=[ctx.t(f"runs.queue.col.{c}") for c in COLUMNS], interactive=False,
                             elem_id="runs-queue-table", max_height=260)
        with gr.Row(equal_height=True):
            pick = gr.Dropdown([], label=ctx.t("runs.queue.pick"), allow_custom_value=False, scale=2,
                               elem_id="runs-queue-pick")
            devices = gr.Textbox(label=ctx.t("runs.queue.devices"), info=ctx.t("runs.queue.devices.info"), scale=1,
                                 elem_id="runs-queue-devices")
            buttons = {a: gr.Button(ctx.t(f"runs.queue.{a}"), scale=0, elem_id=f"runs-queue-{a.replace('_', '-')}",
                                    variant="stop" if a == "cancel" else "secondary") for a in ACTIONS}
        message = gr.Markdown(elem_id="runs-queue-message")

    def refresh(lang, picked):
        text, value, waiting, chosen = queue_view(ctx, lang, picked)
        # The pick is only set when it must change: a tick answering while the user picks another
        # run would otherwise put the old one back.
        return text, value, gr.update(choices=waiting) if chosen == picked else gr.update(choices=waiting, value=chosen)

    outputs = [summary, table, pick]
    gr.context.Context.root_block.load(refresh, [ctx.lang, pick], outputs, **private)
    ctx.timers.poll(TICK_S, refresh, [ctx.lang, pick], outputs)
    ctx.lang.change(refresh, [ctx.lang, pick], outputs, **private)
    for action, button in buttons.items():
        button.click(lambda lang, run_id, devs, a=action: act(ctx, lang, a, run_id, devs),
                     [ctx.lang, pick, devices], message, **private).then(
            refresh, [ctx.lang, pick], outputs, **private)
