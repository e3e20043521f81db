"""What every tab gets from the shell (the contract between ui/shell.py and ui/tabs/*).

Each tab module `ui/tabs/<name>.py` exposes:
  TEXT: dict[str, dict[str, str]]   key -> {"en": ..., "zh": ...}; keys prefixed with the tab name
  build(ctx: UIContext) -> None     builds the tab's components inside the shell's gr.Tab

Labels use `ctx.t(key)` (resolved in the browser by gr.I18n). Messages produced
by handlers take `ctx.lang` (a component holding "en" or "zh") as an input and
format them with `ctx.msg(lang, key, **values)`. Every event listener passes
`api_visibility="private"` unless it is part of the documented API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backend.workspace import Workspace

LANGUAGES = ("en", "zh")


@dataclass
class UIContext:
    workspace: Workspace
    texts: dict[str, dict[str, str]]
    i18n: Any                      # gr.I18n built from `texts`
    lang: Any = None               # component whose value is the current language
    # Components more than one tab reads or writes, e.g. "dataset" (workspace
    # dataset name chosen in Data, used by Train) and "run_id" (run chosen in Runs).
    shared: dict[str, Any] = field(default_factory=dict)

    def t(self, key: str) -> Any:
        return self.i18n(key)

    def msg(self, lang: str | None, key: str, **values: Any) -> str:
        entry = self.texts[key]
        text = entry.get(lang or "en") or entry["en"]
        return text.format(**values) if values else text
