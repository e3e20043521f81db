"""The texts of ui/panels/evalset_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

TEXT: dict[str, dict[str, str]] = {
    "evalset.title": {"en": "Write an eval set from a description", "zh": "根据描述编写评测集"},
    "evalset.description": {"en": "The task, in one line (the judge above writes the prompts)",
                            "zh": "一句话描述任务（由上面的评判模型编写提示）"},
    "evalset.count": {"en": "Prompts", "zh": "提示数"},
    "evalset.write": {"en": "Write prompts", "zh": "编写提示"},
    "evalset.table": {"en": "Review and edit: a row with an empty prompt is left out",
                      "zh": "检查并编辑：提示为空的行不保存"},
    "evalset.name": {"en": "Save as dataset", "zh": "保存为数据集"},
    "evalset.save": {"en": "Save", "zh": "保存"},
    "evalset.asking": {"en": "Asking {model} at {url} for {n} prompts (one call, up to {timeout:.0f} s)...",
                       "zh": "正在请 {url} 上的 {model} 编写 {n} 个提示（一次调用，最多 {timeout:.0f} 秒）……"},
    "evalset.written": {"en": "{n} prompts written: review and edit them below, then save them as a dataset.",
                        "zh": "已编写 {n} 个提示：请在下面检查和编辑，然后保存为数据集。"},
    "evalset.saved": {"en": "Saved {n} rows as dataset {name} ({folder}): pick it in Evaluate or Train.",
                      "zh": "已将 {n} 行保存为数据集 {name}（{folder}）：可在“评估”或“训练”中选择。"},
    "evalset.error": {"en": "Cannot write the eval set: {error}", "zh": "无法编写评测集：{error}"},
    "evalset.no_name": {"en": "Give the dataset a name first.", "zh": "请先给数据集起个名字。"},
}
