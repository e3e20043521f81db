"""The texts of ui/tabs/runs.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _
from ui.texts import (
    diagnostics_panel_texts,
    grpo_panel_texts,
    learning_panel_texts,
    queue_panel_texts,
    sweep_results_panel_texts,
)
from ui.texts.kept_panel_texts import RUNS_TEXT as KEPT_TEXT

TEXT: dict[str, dict[str, str]] = {
    **grpo_panel_texts.TEXT,
    **diagnostics_panel_texts.TEXT,
    **queue_panel_texts.TEXT,
    **sweep_results_panel_texts.TEXT,
    "runs.table": _("Runs", "运行列表"),
    **KEPT_TEXT,  # drops against the run this one continues (ui/panels/kept_panel.py)
    **learning_panel_texts.RUNS_TEXT,
    "runs.refresh": _("Refresh", "刷新"),
    "runs.select": _("Watch run", "查看运行"),
    "runs.stop": _("Stop", "停止"),
    "runs.resume": _("Resume", "继续"),
    "runs.none": _("No run selected. Start one in the Train tab, or pick one above.",
                   "未选择运行。请在“训练”页开始一个，或在上方选择。"),
    "runs.progress": _("step {step} / {max_steps} · elapsed {elapsed} · ETA {eta}",
                       "第 {step} / {max_steps} 步 · 已用 {elapsed} · 预计剩余 {eta}"),
    "runs.stage.demo_model": _("building the demo model (first use in this workspace, once): pre-training step "
                               "{done} / {total} · elapsed {elapsed}",
                               "正在构建演示模型（此工作区首次使用，仅一次）：预训练第 {done} / {total} 步 · 已用 {elapsed}"),
    "runs.stage.convert_model": _("converting the model into a Hugging Face folder (first use in this workspace, "
                                  "once): step {done} / {total} · elapsed {elapsed}",
                                  "正在把模型转换为 Hugging Face 文件夹（此工作区首次使用，仅一次）：第 {done} / {total} 步 · 已用 {elapsed}"),
    "runs.stage.replay": _("the base model answers general prompts for replay (once per model, cached): prompt "
                           "{done} / {total} · elapsed {elapsed}",
                           "基础模型正在回答用于回放的通用提示（每个模型一次，已缓存）：第 {done} / {total} 个提示 · 已用 {elapsed}"),
    "runs.stage.replay_wait_app": _(
        "waiting for the default model's background preparation, which answers the same replay prompts: "
        "{done} of {total} base answers · elapsed {elapsed}",
        "正在等待默认模型的后台准备（它在回答同一批回放提示）：已有 {done} / {total} 条基础回答 · 已用 {elapsed}"),
    "runs.stage.replay_wait": _("waiting for run {holder}, which answers the same replay prompts: {done} of {total} "
                                "base answers · elapsed {elapsed}",
                                "正在等待运行 {holder}（它在回答同一批回放提示）：已有 {done} / {total} 条基础回答 · 已用 {elapsed}"),
    "runs.stage.learning": _("learning report: {checkpoint} answers held-out and general prompts: {done} / {total} "
                             "· elapsed {elapsed}",
                             "学习报告：{checkpoint} 正在回答留出的提示和通用问题：{done} / {total} · 已用 {elapsed}"),
    "runs.stage.learned_check": _("learned stop: the model answers its own training rows: {done} / {total} "
                                  "· elapsed {elapsed}",
                                  "学会即停：模型正在回答自己的训练数据：{done} / {total} · 已用 {elapsed}"),
    "runs.alert.failed": _("❌ **This run failed:** {error}", "❌ **运行失败**：{error}"),
    "runs.alert.no_error": _("the worker recorded no error; see the log below.", "训练进程未记录错误，请查看下方日志。"),
    "runs.alert.lost": _("⚠️ **This run was lost.** {error} Press Resume to continue it.",
                         "⚠️ **运行已丢失**。{error} 点击“继续”以接着训练。"),
    "runs.log": _("train.log (last lines)", "train.log（末尾）"),
    "runs.chart.loss": _("Loss (train raw and smoothed, eval)", "损失（训练原始/平滑，验证）"),
    "runs.chart.lr": _("Learning rate", "学习率"),
    "runs.chart.grad_norm": _("Gradient norm", "梯度范数"),
    "runs.chart.tokens": _("Tokens per second", "每秒 token 数"),
    "runs.chart.memory": _("Memory (GiB)", "内存（GiB）"),
    "runs.chart.layers": _("Gradient norm per layer (attention / MLP)", "逐层梯度范数（注意力 / MLP）"),
    "runs.chart.empty": _("Waiting for the first logged step…", "等待第一个记录的步骤…"),
    "runs.chart.rewards": _("Preference rewards: chosen, rejected, margin", "偏好奖励：chosen、rejected、差值"),
    "runs.chart.accuracy": _("Preference accuracy (share of pairs ranked right)", "偏好准确率（排序正确的样本对比例）"),
    "runs.compare": _("Compare runs", "对比运行"),
    "runs.compare.pick": _("Runs to compare (two or more)", "要对比的运行（两个或更多）"),
    "runs.compare.go": _("Compare", "对比"),
    "runs.compare.need_two": _("Pick at least two runs to compare.", "请至少选择两个运行。"),
    "runs.compare.same": _("These runs have the same settings.", "这些运行的设置相同。"),
    "runs.msg.error": _("❌ {error}", "❌ {error}"),
    # Column headers of the runs table (run_view.TABLE_COLUMNS) and the compare table.
    "runs.col.run": _("run", "运行"),
    "runs.col.state": _("state", "状态"),
    "runs.col.model": _("model", "模型"),
    "runs.col.method": _("method", "方法"),
    "runs.col.progress": _("progress", "进度"),
    "runs.col.best_eval_loss": _("best eval loss", "最佳验证损失"),
    "runs.col.started": _("started", "开始时间"),
    "runs.col.duration": _("duration", "用时"),
    "runs.col.setting": _("setting", "设置"),
    "runs.col.preference_accuracy": _("preference accuracy", "偏好准确率"),
    # Legend and axis words of the charts (ui/views/charts.py WORDS).
    "runs.word.step": _("step", "步数"),
    "runs.word.loss": _("loss", "损失"),
    "runs.word.train_loss": _("train loss", "训练损失"),
    "runs.word.train_loss_smoothed": _("train loss (smoothed)", "训练损失（平滑）"),
    "runs.word.eval_loss": _("eval loss", "验证损失"),
    "runs.word.minutes": _("minutes", "分钟"),
    "runs.word.norm": _("norm", "范数"),
    "runs.word.train": _("train", "训练"),
    "runs.word.eval": _("eval", "验证"),
    "runs.word.learning_rate": _("learning rate", "学习率"),
    "runs.word.grad_norm": _("gradient norm", "梯度范数"),
    "runs.word.tokens_per_second": _("tokens / s", "token / 秒"),
    "runs.word.allocated": _("allocated", "已分配"),
    "runs.word.reserved": _("reserved", "已预留"),
    "runs.word.rss": _("rss", "进程内存"),
    "runs.word.attn": _("attn", "注意力"),
    "runs.word.mlp": _("mlp", "MLP"),
    "runs.word.rewards/chosen": _("rewards/chosen", "chosen 奖励"),
    "runs.word.rewards/rejected": _("rewards/rejected", "rejected 奖励"),
    "runs.word.rewards/margins": _("rewards/margins", "奖励差值"),
    "runs.word.rewards/accuracies": _("rewards/accuracies", "偏好准确率"),
    # The run states (status.json `state`) as the runs table shows them.
    **{f"runs.state.{state}": _(state, zh) for state, zh in (
        ("queued", "排队中"), ("running", "运行中"), ("completed", "已完成"), ("stopped", "已停止"),
        ("failed", "失败"), ("lost", "已丢失"))},
}
