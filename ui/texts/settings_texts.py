"""The texts of ui/tabs/settings.py, English and Chinese (the rule: ui/texts/__init__.py); the tab's
TEXT merges them with its panels' tables."""

from __future__ import annotations

TEXT: dict[str, dict[str, str]] = {
    "settings.intro": {"en": "Settings of this workspace, kept in its settings.json.",
                       "zh": "本工作区的设置，保存在其 settings.json 中。"},
}
