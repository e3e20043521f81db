"""The texts of ui/panels/kept_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _

EVALUATE_TEXT: dict[str, dict[str, str]] = {
    "evaluate.kept.title": _("Beside the run it continues", "与所继续的父运行并排对比"),
    "evaluate.kept.about": _(
        "This run started from another run's adapter. Both answer the parent's held-out rows the same way: exact "
        "match, BLEU and ROUGE (0-100), eval loss over the answers, the share of answers that end before "
        "max_new_tokens, and preference accuracy on this run's held-out pairs (the parent is the reference: 0.5).",
        "此运行从另一个运行的适配器开始。两者以相同方式回答父运行的留出数据：完全匹配、BLEU 与 ROUGE（0-100）、回答部分的评估损失、"
        "在 max_new_tokens 之前正常结束的回答比例，以及本运行留出样本对上的偏好准确率（父运行即参考模型：0.5）。"),
    "evaluate.kept.rows": _("{rows} rows of {data}, max_new_tokens {max_new_tokens}.",
                            "{data} 的 {rows} 行，max_new_tokens {max_new_tokens}。"),
    "evaluate.kept.none": _("Not compared yet: evaluate this run's checkpoints on the held-out split.",
                            "尚未对比：请在留出数据上评估本运行的检查点。"),
    "evaluate.kept.metric": _("metric", "指标"),
    "evaluate.kept.parent": _("parent ({label})", "父运行（{label}）"),
    "evaluate.kept.no_drop": _("✅ No drop beyond the thresholds.", "✅ 没有超过阈值的下降。"),
}

RUNS_TEXT: dict[str, dict[str, str]] = {
    "runs.kept.drop": _("⚠️ **Worse than the run it continues:** {sentence}", "⚠️ **比所继续的父运行差**：{sentence}"),
    "runs.kept.not_compared": _("This run continues {parent}; evaluate it (Evaluate tab) to see whether its answers "
                                "kept the parent's quality.",
                                "此运行继续自 {parent}；在“评估”页评估它，看回答是否保住了父运行的质量。"),
}
