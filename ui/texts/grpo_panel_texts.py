"""The texts of ui/panels/grpo_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _

TEXT: dict[str, dict[str, str]] = {
    "runs.grpo.title": _("GRPO: rewards and what the model writes", "GRPO：奖励与模型现在的输出"),
    "runs.grpo.chart.rewards": _("Rewards: each on its own and their weighted sum", "奖励：各项奖励及其加权和"),
    "runs.grpo.chart.length": _("Completion length (tokens)", "生成长度（token）"),
    "runs.grpo.chart.format": _("Share of completions in the format", "符合格式的生成比例"),
    "runs.grpo.chart.kl": _("KL to the reference model", "与参考模型的 KL"),
    "runs.grpo.chart.empty": _("Waiting for the first logged step…", "等待第一个记录的步骤…"),
    "runs.grpo.chart.no_kl": _("No KL: beta is 0 (no reference model)", "无 KL：beta 为 0（没有参考模型）"),
    "runs.grpo.chart.no_format": _("No format reward in this run", "此运行没有格式奖励"),
    "runs.grpo.samples": _("Sample completions", "生成样例"),
    "runs.grpo.step": _("Logging step", "记录步"),
    "runs.grpo.step.info": _("Empty: the newest step.", "留空：最新一步。"),
    "runs.grpo.no_samples": _("No sample completions yet: they are written at each logging step.",
                              "还没有生成样例：每个记录步都会写入。"),
    "runs.grpo.samples_of": _("{count} completions of step {step} (newest: step {newest}).",
                              "第 {step} 步的 {count} 条生成（最新：第 {newest} 步）。"),
    # Legend, axis and column words (ui/views/grpo_charts.py).
    "runs.grpo.word.step": _("step", "步数"),
    "runs.grpo.word.reward": _("reward", "奖励"),
    "runs.grpo.word.weighted_sum": _("weighted sum", "加权和"),
    "runs.grpo.word.eval": _("eval", "验证"),
    "runs.grpo.word.exact_match": _("exact match", "完全匹配"),
    "runs.grpo.word.format": _("format", "格式"),
    "runs.grpo.word.length": _("length", "长度"),
    "runs.grpo.word.contains": _("contains", "包含"),
    "runs.grpo.word.not_contains": _("does not contain", "不包含"),
    "runs.grpo.word.tokens": _("tokens", "token"),
    "runs.grpo.word.mean_length": _("mean", "平均"),
    "runs.grpo.word.min_length": _("shortest", "最短"),
    "runs.grpo.word.max_length": _("longest", "最长"),
    "runs.grpo.word.format_share": _("in the format", "符合格式"),
    "runs.grpo.word.prompt": _("prompt", "提示"),
    "runs.grpo.word.completion": _("completion", "生成"),
}
