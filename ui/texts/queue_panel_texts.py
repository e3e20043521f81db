"""The texts of ui/panels/queue_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _

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
