"""The texts of ui/panels/learning_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _

RUNS_TEXT: dict[str, dict[str, str]] = {
    "runs.learning.chart": _("Learning report: learned, kept, ended (%)", "学习报告：学到、保留、正常结束（%）"),
    "runs.learning.learned": _("learned (held-out prompts right)", "学到（留出提示答对）"),
    "runs.learning.kept": _("kept (base's right answers still right)", "保留（基础模型答对的仍答对）"),
    "runs.learning.ended": _("ended with EOS", "以结束符结束"),
    "runs.learning.empty": _("No learning report yet: the base is scored before the first step.",
                             "还没有学习报告：基础模型会在第一步之前打分。"),
}

TABLE_TEXT: dict[str, dict[str, str]] = {
    "evaluate.learning.col.checkpoint": _("checkpoint", "检查点"),
    "evaluate.learning.col.step": _("step", "步数"),
    "evaluate.learning.col.learned": _("learned", "学到"),
    "evaluate.learning.col.kept": _("kept", "保留"),
    "evaluate.learning.col.ended": _("ended", "正常结束"),
    "evaluate.learning.col.rouge_l": _("ROUGE-L", "ROUGE-L"),
    "evaluate.learning.kept_base": _("{n} right of {of}", "{of} 个中答对 {n} 个"),
    "evaluate.learning.kept_about": _("kept: of the general questions the base answers right, the share still right.",
                             "保留：基础模型答对的通用问题中，仍然答对的比例。"),
    "evaluate.learning.skipped": _("not scored: {checkpoint} (step {step}): {reason}", "未打分：{checkpoint}（第 {step} 步）：{reason}"),
}

EVALUATE_TEXT: dict[str, dict[str, str]] = {
    **TABLE_TEXT,
    "evaluate.learning.title": _("Learning report: what the run learned and what it kept",
                                 "学习报告：学到了什么，保留了什么"),
    "evaluate.learning.start": _("Score every checkpoint", "为每个检查点打分"),
    "evaluate.learning.started": _("Scoring the base and every checkpoint in the background (pid {pid}).",
                                   "正在后台为基础模型和每个检查点打分（pid {pid}）。"),
    "evaluate.learning.progress": _("{stage}: answer {done} / {total}", "{stage}：第 {done} / {total} 个回答"),
    "evaluate.learning.failed": _("❌ The learning report failed: {error}", "❌ 学习报告失败：{error}"),
    "evaluate.learning.no_run": _("Choose a run first.", "请先选择一个运行。"),
}

CHAT_TEXT: dict[str, dict[str, str]] = {  # with TABLE_TEXT, which the Evaluate tab brings
    "chat.report.title": _("Report: the base and a checkpoint on prompts the run never trained on",
                           "报告：基础模型与检查点在未训练过的提示上的回答"),
    "chat.report.checkpoint": _("Checkpoint", "检查点"),
    "chat.report.only_changed": _("Only the prompts where the base and the checkpoint differ in rightness",
                                  "只显示基础模型与检查点对错不同的提示"),
    "chat.report.kind": _("set", "类别"),
    "chat.report.kind.learned": _("learned", "学到"),
    "chat.report.kind.kept": _("kept", "保留"),
    "chat.report.prompt": _("prompt", "提示"),
    "chat.report.reference": _("right answer holds", "正确答案包含"),
    "chat.report.base": _("base", "基础模型"),
    "chat.report.answer": _("checkpoint", "检查点"),
    "chat.report.no_run": _("Choose a run above to see its report.", "请在上方选择一个运行以查看报告。"),
}
