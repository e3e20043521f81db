"""The texts of ui/panels/vote_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

TEXT: dict[str, dict[str, str]] = {
    "chat.votes_title": {"en": "Votes as training data", "zh": "把投票变成训练数据"},
    "chat.votes_name": {"en": "Dataset name", "zh": "数据集名称"},
    "chat.votes_save": {"en": "Save votes as a preference dataset", "zh": "把投票保存为偏好数据集"},
    "chat.votes_train": {"en": "Train on these votes", "zh": "用这些投票训练"},
    "chat.tie": {"en": "Tie", "zh": "平局"},
    "chat.msg_votes_pick_run": {"en": "Pick the run whose votes to use (one run).", "zh": "请选择一个要使用其投票的运行。"},
    "chat.msg_votes_saved": {"en": "Saved {pairs} pairs from {votes} votes of {run} as dataset '{name}' "
                                   "(skipped: {ties} ties, {single} single-column, {old} without answers, "
                                   "{same} losing answers empty or the same as the winner's, {context} answering "
                                   "after other earlier turns than the winner's: a pair needs one conversation).",
                             "zh": "已把 {run} 的 {votes} 次投票中的 {pairs} 对保存为数据集“{name}”"
                                   "（跳过：平局 {ties}，单列 {single}，无回答 {old}，落败回答为空或与胜者相同 {same}，"
                                   "落败回答前的对话与胜者不同 {context}：一对回答需要同一段对话）。"},
    "chat.msg_votes_error": {"en": "⚠️ {error}", "zh": "⚠️ {error}"},
    "chat.msg_votes_train": {"en": "The Train tab now holds a dpo run on '{name}' continuing {checkpoint}; "
                                   "check it and press Start.",
                             "zh": "“训练”页已填好基于“{name}”的 dpo 运行（从 {checkpoint} 继续），检查后点击开始。"},
}
