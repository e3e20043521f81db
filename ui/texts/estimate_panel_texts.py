"""The texts of ui/panels/estimate_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _

TEXT: dict[str, dict[str, str]] = {
    "train.time.header": _("**Time**", "**时间**"),
    "train.time.measure": _("Measure speed (a few real steps)", "测速（真实训练几步）"),
    "train.time.probe_stage": _("⏳ Measuring speed, before its first step: {stage}", "⏳ 测速中，第一步之前：{stage}"),
    "train.time.probe_step": _("⏳ Measuring speed: step {step} of {steps} · elapsed {elapsed}",
                               "⏳ 测速中：第 {step} / {steps} 步 · 已用 {elapsed}"),
}
