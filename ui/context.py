"""What every tab gets from the shell (the contract between ui/shell.py and ui/tabs/*).

Each tab module `ui/tabs/<name>.py` exposes:
  TEXT: dict[str, dict[str, str]]   key -> {"en": ..., "zh": ...}; keys prefixed with the tab name
                                    (the table lives in ui/texts/<name>_texts.py: ui/texts/__init__.py)
  build(ctx: UIContext) -> None     builds the tab's components inside the shell's gr.Tab

Handlers are module-level functions over the context and the plain values a
browser sends (tested without a browser, tests/test_ui_*.py); build() only
creates components and wires events, within 80 lines (tests/test_ui_layout.py).
What two tabs share lives in a ui module that is not a tab (e.g. ui/run_actions.py).

Labels use `ctx.t(key)` (resolved in the browser by gr.I18n). Messages produced
by handlers take `ctx.lang` (a component holding "en" or "zh") as an input and
format them with `ctx.msg(lang, key, **values)`. Every event listener passes
`api_visibility="private"` unless it is part of the documented API.

Shared components (`ctx.shared`), created by the shell before any tab is built:
  "dataset"  gr.State[str | None]  workspace dataset name chosen or saved in Data;
                                   Train reads it (listen to its .change).
  "run_id"   gr.State[str | None]  run chosen in Runs; Chat / Evaluate / Export may follow it.
  "train_prefill" gr.State[dict | None] a RunConfig as a dict; Train fills its form from it
                                   (Chat's "Train on these votes").
  "identity" gr.State[dict | None] the Train form's {"identity_name": ..., "identity_author": ...}
                                   once either changes (None before: forms.form_defaults); the
                                   Data tab checks {{name}} / {{author}} filled with them.
  "tabs"     gr.Tabs               output gr.Tabs(selected="train") to switch tabs.
A tab polls with `ctx.timers.poll(seconds, fn, inputs, outputs)`, not a gr.Timer of its own: the
shell gives each tab one timer, whose one event runs the tab's polls, and it ticks only while the
tab is shown (ui/tab_timers.py); a handler that switches tabs registers its event with
`ctx.timers.switched_by(event, tab, when)`.
A tab that must react to the others' selection appends to `ctx.after_tabs` a function of
{name: gr.Tab}; the shell calls it once every tab is built.
"dataset" and "run_id" start from the last used values in settings.json.

Services (one per app, shared by every tab; tests pass their own or get one):
  ctx.store   RunStore of the workspace: it launches and reaps workers and
              remembers their processes, so every tab uses this one instead of
              making its own.
  ctx.data_sessions  DataSessions: the files open in the Data tab with their
              rows, by the token in each browser's state.

Code from the browser: `ctx.accepts_code` is False when the app is open to other computers
(--allow-remote, --share) and was not started with --allow-remote-code. Then a handler that
turns the browser's values into a run calls `ctx.check_code_settings(config)`, which refuses
the settings that would run code on this machine (backend/config_policy.py, code_fields) with a
sentence, and task files are refused as benchmarks (docs/CONTRACTS.md, "Security defaults").

Last used settings: `ctx.saved()` returns the workspace's settings.json as a
dict (read fresh, so use it inside a handler or `demo.load`), and
`ctx.remember(key=value, ...)` merges values into it (None removes a key).
Known keys: "language", "dataset", "run_id", "model"; a tab may keep its form
under its own key, e.g. "train": {...}.

Heavy libraries (torch, transformers, peft) must not be imported when a tab
module is imported or built: import them inside handlers, so the page is
served before they load (tests/test_app_startup.py checks this). plotly's own
import is lazy (0.04 s), so it sits at the top; its figures are built in handlers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend.config_policy import refuse_code_settings
from backend.runs.store import RunStore
from backend.runs.workspace import Workspace
from ui.data_session import DataSessions
from ui.settings import load_settings, save_settings
from ui.tab_timers import TabTimers


@dataclass
class UIContext:
    workspace: Workspace
    texts: dict[str, dict[str, str]]
    i18n: Any                      # gr.I18n built from `texts`
    lang: Any = None               # component whose value is the current language
    # Components more than one tab reads or writes, e.g. "dataset" (workspace
    # dataset name chosen in Data, used by Train) and "run_id" (run chosen in Runs).
    shared: dict[str, Any] = field(default_factory=dict)
    store: RunStore | None = None  # the app's one RunStore; made for `workspace` when not given
    recipe: str = "starter"  # the Train form's defaults before anything was saved (backend/config_recipes.py)
    # The files open in the Data tab, read once and kept between its events (ui/data_session.py).
    data_sessions: DataSessions = field(default_factory=DataSessions)
    # Whether the browser may set what runs code here: False on an app open to other computers
    # unless it was started with --allow-remote-code (app.py).
    accepts_code: bool = True
    # Wiring that needs every tab, called by the shell once all are built with {name: gr.Tab}
    # (the Train tab's view ticks only while its tab is shown: ui/panels/train_watch_panel.py).
    after_tabs: list[Callable[[dict[str, Any]], None]] = field(default_factory=list)
    # The tabs' polls: one timer per tab, ticking only while its tab is shown (ui/tab_timers.py).
    timers: TabTimers = field(default_factory=TabTimers)

    def __post_init__(self) -> None:
        if self.store is None:
            self.store = RunStore(self.workspace)

    def check_code_settings(self, config: Any) -> None:
        """ConfigError when the browser set code (trust_remote_code, callbacks, loss_function,
        reward_functions) and this app does not take code from a browser."""
        if not self.accepts_code:
            refuse_code_settings(config)

    def saved(self) -> dict[str, Any]:
        return load_settings(self.workspace)

    def remember(self, **values: Any) -> dict[str, Any]:
        return save_settings(self.workspace, **values)

    def t(self, key: str) -> Any:
        return self.i18n(key)

    def msg(self, lang: str | None, key: str, **values: Any) -> str:
        entry = self.texts[key]
        text = entry.get(lang or "en") or entry["en"]
        return text.format(**values) if values else text
