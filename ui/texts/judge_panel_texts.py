"""The texts of ui/panels/judge_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import evalset_panel_texts

TEXT: dict[str, dict[str, str]] = {
    "jpanel.title": {"en": "Judge (a model that compares answers)", "zh": "评判模型（比较回答的模型）"},
    "jpanel.url": {"en": "Judge URL (OpenAI-compatible)", "zh": "评判模型地址（OpenAI 兼容）"},
    "jpanel.model": {"en": "Judge model name", "zh": "评判模型名称"},
    "jpanel.key": {"en": "API key (empty for a local server)", "zh": "API 密钥（本地服务留空）"},
    "jpanel.mode": {"en": "What to judge", "zh": "评判方式"},
    "jpanel.mode.pairwise": {"en": "A against B (both orders)", "zh": "A 对 B（两种顺序）"},
    "jpanel.mode.graded": {"en": "Grade 1-5 on a rubric", "zh": "按评分标准打 1-5 分"},
    "jpanel.mode.calibration": {"en": "Agreement with my votes", "zh": "与我的投票的一致程度"},
    "jpanel.a": {"en": "A (pairwise)", "zh": "A（成对比较）"},
    "jpanel.b": {"en": "B (pairwise)", "zh": "B（成对比较）"},
    "jpanel.graded_names": {"en": "Checkpoints to grade (space-separated; empty: all)",
                            "zh": "要打分的检查点（用空格分隔；留空为全部）"},
    "jpanel.source": {"en": "Answers from", "zh": "回答来源"},
    "jpanel.source.identity": {"en": "learning report: held-out identity prompts", "zh": "学习报告：留出的身份提示"},
    "jpanel.source.learning": {"en": "learning report: all held-out prompts", "zh": "学习报告：全部留出的提示"},
    "jpanel.source.predictions": {"en": "the evaluation above (predictions)", "zh": "上面的评估（预测结果）"},
    "jpanel.rubric_kind": {"en": "Default rubric", "zh": "默认评分标准"},
    "jpanel.limit": {"en": "Rows (0 = all)", "zh": "行数（0 为全部）"},
    "jpanel.prompts": {"en": "The judge's prompt and rubric (editable)", "zh": "评判模型的提示和评分标准（可编辑）"},
    "jpanel.template": {"en": "Prompt template: {prompt}, {reference} and the answers are filled in; empty: the default",
                        "zh": "提示模板：会填入 {prompt}、{reference} 和回答；留空为默认"},
    "jpanel.rubric_text": {"en": "Rubric (graded): one line per grade, 1 to 5; empty: the default rubric",
                           "zh": "评分标准（打分时）：每个分数一行，1 到 5；留空为默认评分标准"},
    "jpanel.reset": {"en": "Show the defaults", "zh": "显示默认内容"},
    "jpanel.plan": {"en": "Count calls", "zh": "统计调用次数"},
    "jpanel.start": {"en": "Judge", "zh": "开始评判"},
    "jpanel.table": {"en": "Judgements of this run", "zh": "本运行的评判结果"},
    "jpanel.chart": {"en": "Judgements against the training step", "zh": "评判结果随训练步数的变化"},
    "jpanel.about": {
        "en": "Pairwise asks each row twice, A first and B first; the win rate counts a tie as half, with a Wilson "
              "95% interval. Answers are cached by (judge, prompt, answers): a rerun costs no call. Prompts, answers "
              "and reasons are kept in RUN/eval/judge/; `python -m backend.evaluate --print-judge-prompts` shows "
              "the templates to edit.",
        "zh": "成对比较对每行问两次（A 在前、B 在前）；胜率把平局算作一半，并给出 Wilson 95% 区间。回答按（评判模型、提示、回答）缓存："
              "再次运行不需要调用。提示、回答和理由保存在 RUN/eval/judge/；`python -m backend.evaluate --print-judge-prompts` "
              "会显示可编辑的模板。"},
    "jpanel.msg_pick_run": {"en": "Pick a run first.", "zh": "请先选择一个训练运行。"},
    "jpanel.msg_plan": {"en": "{calls} judge calls to make ({cached} of {prompts} prompts from the cache, {rows} rows).",
                        "zh": "需要调用评判模型 {calls} 次（{prompts} 个提示中 {cached} 个来自缓存，共 {rows} 行）。"},
    "jpanel.msg_started": {"en": "The judge started in the background (pid {pid}).", "zh": "评判已在后台开始（进程 {pid}）。"},
    "jpanel.msg_error": {"en": "Cannot judge: {error}", "zh": "无法评判：{error}"},
    "jpanel.progress": {"en": "{stage}", "zh": "{stage}"},
    "jpanel.failed": {"en": "The judge failed: {error}", "zh": "评判失败：{error}"},
    "jpanel.col.name": {"en": "judgement", "zh": "评判"},
    "jpanel.col.checkpoint": {"en": "checkpoint", "zh": "检查点"},
    "jpanel.col.score": {"en": "win rate / mean grade / agreement", "zh": "胜率 / 平均分 / 一致率"},
    "jpanel.col.spread": {"en": "95% interval / std / kappa", "zh": "95% 区间 / 标准差 / kappa"},
    "jpanel.col.counts": {"en": "counts", "zh": "计数"},
    "jpanel.col.judge": {"en": "judge", "zh": "评判模型"},
    **evalset_panel_texts.TEXT,
}
