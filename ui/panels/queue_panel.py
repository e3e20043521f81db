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

TICK_S = 5.0
COLUMNS = ("position", "run", "state", "devices", "behind", "start", "end", "source")
ACTIONS = ("cancel", "up", "down", "start_now")


def _(en: str, zh: str) -> dict[str, str]:
    return {"en": en, "zh": zh}


TEXT: dict[str, dict[str, str]] = {
    "runs.queue.title": _("Queue", "队列"),
    "runs.queue.empty": _("The queue is empty: a Start on busy devices waits here and starts by itself when they "
                          "are free.", "队列为空：设备忙时点击“开始”的运行会在这里等待，设备空闲后自动开始。"),
    "runs.queue.summary": _("**Queue:** {waiting} waiting, {running} running · since it was last idle: "
                            "{completed} completed, {stopped} stopped or cancelled, {failed} failed",
                            "**队列**：{waiting} 个等待，{running} 个运行中 · 自上次空闲以来：{completed} 个完成，"
                            "{stopped} 个停止或取消，{failed} 个失败"),
    "runs.queue.failed_run": _("❌ **{run_id}** failed: {error}", "❌ **{run_id}** 失败：{error}"),
    "runs.queue.pick": _("Queued run", "队列中的运行"),
    "runs.queue.devices": _("Start now on (devices)", "立即开始所用设备"),
    "runs.queue.devices.info": _("Empty: its own. Else cpu, or GPU indices such as 1 or 0,1.",
                                 "留空：使用它自己的设备。或填 cpu，或 GPU 编号，如 1 或 0,1。"),
    "runs.queue.cancel": _("Cancel", "取消"),
    "runs.queue.up": _("Up", "上移"),
    "runs.queue.down": _("Down", "下移"),
    "runs.queue.start_now": _("Start now", "立即开始"),
    "runs.queue.none_picked": _("Pick a queued run first.", "请先选择队列中的运行。"),
    "runs.queue.done.cancel": _("Cancelled **{run_id}**: it left the queue.", "已取消 **{run_id}**：它已移出队列。"),
    "runs.queue.done.up": _("**{run_id}** is now number {position} in the queue.", "**{run_id}** 现在排在队列第 {position} 位。"),
    "runs.queue.done.start_now": _("Started **{run_id}**.", "已开始 **{run_id}**。"),
    "runs.queue.error": _("❌ {error}", "❌ {error}"),
    "runs.queue.unknown": _("unknown", "未知"),
    "runs.queue.running": _("running", "运行中"),
    "runs.queue.waiting": _("waiting", "等待中"),
    "runs.queue.in": _("{clock} (in {wait})", "{clock}（{wait}后）"),
    "runs.queue.col.position": _("#", "#"),
    "runs.queue.col.run": _("run", "运行"),
    "runs.queue.col.state": _("state", "状态"),
    "runs.queue.col.devices": _("devices", "设备"),
    "runs.queue.col.behind": _("waits for", "等待"),
    "runs.queue.col.start": _("estimated start", "预计开始"),
    "runs.queue.col.end": _("estimated end", "预计结束"),
    "runs.queue.col.source": _("estimate from", "估计来源"),
    "runs.queue.source.measured": _("its own steps", "它自己已跑的步"),
    "runs.queue.source.runs": _("earlier runs' speed here", "本机之前运行的速度"),
    "runs.queue.source.probe": _("a speed probe", "速度测量"),
    "runs.queue.source.flops": _("the model's FLOPs", "模型的 FLOPs"),
    "runs.queue.source.earlier_run": _("a finished run of this model", "同一模型已完成的运行"),
    "runs.queue.source.unknown": _("no estimate", "无估计"),
}
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
    gr.Timer(TICK_S).tick(refresh, [ctx.lang, pick], outputs, show_progress="hidden", **private)
    ctx.lang.change(refresh, [ctx.lang, pick], outputs, **private)
    for action, button in buttons.items():
        button.click(lambda lang, run_id, devs, a=action: act(ctx, lang, a, run_id, devs),
                     [ctx.lang, pick, devices], message, **private).then(
            refresh, [ctx.lang, pick], outputs, **private)
