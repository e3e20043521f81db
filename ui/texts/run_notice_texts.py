"""The texts of ui/panels/run_notice.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

TEXT: dict[str, dict[str, str]] = {
    "notice.step": {"en": "step {step}/{total}", "zh": "第 {step}/{total} 步"},
    "notice.step_only": {"en": "step {step}", "zh": "第 {step} 步"},
    "notice.starting": {"en": "starting", "zh": "正在启动"},
    "notice.state.completed": {"en": "completed", "zh": "已完成"},
    "notice.state.failed": {"en": "failed", "zh": "失败"},
    "notice.state.stopped": {"en": "stopped", "zh": "已停止"},
    "notice.state.lost": {"en": "lost", "zh": "已丢失"},
    "notice.ended": {"en": "Run {run_id} {state}", "zh": "运行 {run_id} {state}"},
}
