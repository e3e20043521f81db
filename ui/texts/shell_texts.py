"""The texts of ui/shell.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

TEXT: dict[str, dict[str, str]] = {
    # One I18n value per component: gradio translates a whole value, not pieces of a string.
    "shell.title": {
        "en": "## FineTune Studio\nFine-tune language models on your own data, locally.",
        "zh": "## FineTune Studio 微调工作室\n在本机用你自己的数据微调语言模型。",
    },
    "shell.language": {"en": "Language", "zh": "语言"},
    "shell.tab.data": {"en": "Data", "zh": "数据"},
    "shell.tab.train": {"en": "Train", "zh": "训练"},
    "shell.tab.runs": {"en": "Runs", "zh": "运行"},
    "shell.tab.chat": {"en": "Chat", "zh": "对话"},
    "shell.tab.evaluate": {"en": "Evaluate", "zh": "评估"},
    "shell.tab.export": {"en": "Export", "zh": "导出"},
    "shell.tab.settings": {"en": "Settings", "zh": "设置"},
}
