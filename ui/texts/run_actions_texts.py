"""The texts of ui/run_actions.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

TEXT: dict[str, dict[str, str]] = {
    "run_actions.no_run": {"en": "No run to act on: start one here or select one in the Runs tab.",
                           "zh": "没有可操作的运行：请在此开始一个，或在“运行”页选择。"},
    "run_actions.stopping": {"en": "⏹ Stopping run **{run_id}**: {what}", "zh": "⏹ 正在停止 **{run_id}**：{what}"},
    "run_actions.cancelled": {"en": "⏹ Run **{run_id}** was waiting in the queue: cancelled, it never started.",
                              "zh": "⏹ 运行 **{run_id}** 原在队列中等待：已取消，从未开始。"},
    "run_actions.resumed": {"en": "▶️ Resumed run **{run_id}**.", "zh": "▶️ 已继续运行 **{run_id}**。"},
    "run_actions.refused": {"en": "❌ {error}", "zh": "❌ {error}"},
}
