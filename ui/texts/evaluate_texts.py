"""The texts of ui/tabs/evaluate.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import benchmark_panel_texts, judge_panel_texts, learning_panel_texts
from ui.texts.kept_panel_texts import EVALUATE_TEXT as KEPT_TEXT

TEXT: dict[str, dict[str, str]] = {
    **KEPT_TEXT,  # the side-by-side with the run this one continues (ui/panels/kept_panel.py)
    **learning_panel_texts.EVALUATE_TEXT,
    "evaluate.run": {"en": "Run", "zh": "训练运行"},
    "evaluate.refresh": {"en": "Refresh", "zh": "刷新"},
    "evaluate.checkpoints": {"en": "Checkpoints to evaluate (base = the model before training)",
                             "zh": "要评估的检查点（base 为训练前的基座模型）"},
    "evaluate.source": {"en": "Evaluation set", "zh": "评估数据"},
    "evaluate.source_split": {"en": "The run's held-out split", "zh": "该运行留出的验证集"},
    "evaluate.source_file": {"en": "An uploaded file", "zh": "上传的文件"},
    "evaluate.file": {"en": "Evaluation file (JSON, JSONL, CSV, Parquet)", "zh": "评估文件（JSON、JSONL、CSV、Parquet）"},
    "evaluate.max_samples": {"en": "Max rows (0 = all)", "zh": "最多行数（0 为全部）"},
    "evaluate.max_new_tokens": {"en": "Max new tokens per answer", "zh": "每个回答最多生成的 token 数"},
    "evaluate.start": {"en": "Evaluate", "zh": "开始评估"},
    "evaluate.scorers": {"en": "Scorers for this eval set (YAML or JSON list; empty: none)",
                         "zh": "本评估数据的评分器（YAML 或 JSON 列表；留空为不用）"},
    "evaluate.scorers_info": {
        "en": "Each answer is checked by every scorer; the table shows the share of rows passing each. Kinds: "
              "exact_match, contains, not_contains, regex, format, json (keys, schema), number (tolerance), length "
              "(min, max tokens), rouge_l, bleu (threshold 0-1), right_answer. E.g. - {kind: contains, text: 巴黎}",
        "zh": "每个回答都由每个评分器检查；结果表显示通过各评分器的行所占比例。种类：exact_match、contains、not_contains、"
              "regex、format、json（keys、schema）、number（tolerance）、length（min、max，单位 token）、rouge_l、"
              "bleu（threshold 0-1）、right_answer。例如 - {kind: contains, text: 巴黎}"},
    "evaluate.results": {"en": "Results (★ = best per metric)", "zh": "结果（★ 表示该指标最佳）"},
    "evaluate.chart": {"en": "Metrics against the training step", "zh": "各指标随训练步数的变化"},
    "evaluate.predictions": {"en": "Predictions and references", "zh": "预测与参考答案"},
    "evaluate.disagree_only": {"en": "Only rows where the checkpoints disagree (most first)",
                               "zh": "只看检查点回答不一致的行（分歧最大的在前）"},
    "evaluate.about": {
        "en": "Eval loss and perplexity are over the assistant tokens only. Answers are greedy. BLEU: sacrebleu "
              "(zh tokenizer when the references hold Chinese). ROUGE: F-measure with every Chinese character as a "
              "token and English words as rouge-score splits them. Exact match ignores surrounding whitespace.",
        "zh": "评估损失与困惑度只计算助手回答部分的 token。回答采用贪心解码。BLEU 使用 sacrebleu（参考答案含中文时用 zh 分词）。"
              "ROUGE 为 F 值，每个汉字作为一个词元，英文按 rouge-score 的方式分词。完全匹配忽略首尾空白。"},
    "evaluate.msg_no_runs": {"en": "No runs yet: train one in the Train tab first.",
                             "zh": "还没有训练运行：请先在“训练”页训练一个。"},
    "evaluate.msg_pick_run": {"en": "Pick a run first.", "zh": "请先选择一个训练运行。"},
    "evaluate.msg_no_file": {"en": "Upload an evaluation file first, or choose the held-out split.",
                             "zh": "请先上传评估文件，或选择留出的验证集。"},
    "evaluate.msg_bad_suffix": {"en": "The file must end in {suffixes}.", "zh": "文件扩展名必须是 {suffixes} 之一。"},
    "evaluate.msg_started": {"en": "Evaluation started in the background (pid {pid}). You can close this page.",
                             "zh": "评估已在后台开始（进程 {pid}）。可以关闭本页面。"},
    "evaluate.msg_error": {"en": "Cannot evaluate: {error}", "zh": "无法评估：{error}"},
    "evaluate.progress": {"en": "{stage}: {done} of {total}", "zh": "{stage}：{done} / {total}"},
    "evaluate.done": {"en": "Evaluation finished.", "zh": "评估完成。"},
    "evaluate.failed": {"en": "Evaluation failed: {error}", "zh": "评估失败：{error}"},
    "evaluate.none_yet": {"en": "No evaluation results for this run yet.", "zh": "该运行还没有评估结果。"},
    **benchmark_panel_texts.TEXT,
    **judge_panel_texts.TEXT,
}
