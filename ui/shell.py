"""The window around the tabs: title, language switch, the tabs in order,
and the gradio launch settings that make a local app safe by default.

Each tab is `ui/tabs/<name>.py` exposing TEXT and build(ctx) (see ui/context.py),
imported at the top like any other module.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

# Before gradio is imported: no usage analytics leave this machine.
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from backend.runs.scheduler import QueueScheduler  # noqa: E402
from backend.runs.store import RunStore  # noqa: E402
from backend.runs.workspace import Workspace  # noqa: E402
from ui.context import UIContext  # noqa: E402
from ui.i18n import APPLY_LANGUAGE_JS, BROWSER_LANGUAGE_JS, build_i18n, merge_texts, normalise_language  # noqa: E402
from ui.panels import run_notice  # noqa: E402
from ui.settings import load_settings, save_settings  # noqa: E402
from ui.tabs import chat, data, evaluate, export, runs, train  # noqa: E402
from ui.tabs import settings as settings_tab  # noqa: E402
from ui.texts.shell_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)
from ui.views.data_view import CHAT_CSS  # noqa: E402
from ui.warmup import start_in_background

# The tabs in display order: each module exposes TEXT and build(ctx) (ui/context.py). Imported here,
# so a tab that is missing or renamed fails the app's start instead of vanishing from the page.
TABS: dict[str, ModuleType] = {"data": data, "train": train, "runs": runs, "chat": chat, "evaluate": evaluate,
                               "export": export, "settings": settings_tab}

CSS = """
#shell-header { align-items: center; }
#shell-header h2 { margin: 0; }
#shell-language { max-width: 16rem; }
footer { opacity: 0.6; }
"""


def build_app(workspace: Workspace, recipe: str = "starter", accepts_code: bool = True) -> gr.Blocks:
    """The whole UI for `workspace` (not launched); `accepts_code` False: the browser may not set what
    runs code on this machine (UIContext.accepts_code)."""
    modules = TABS
    texts = merge_texts(TEXT, run_notice.TEXT, *(getattr(m, "TEXT", {}) for m in modules.values()))
    i18n = build_i18n(texts)
    saved = load_settings(workspace)
    with gr.Blocks(title="FineTune Studio", fill_width=True, analytics_enabled=False) as demo:
        with gr.Row(elem_id="shell-header", equal_height=True):
            gr.Markdown(i18n("shell.title"), elem_id="shell-title")
            lang = gr.Radio(
                choices=[("English", "en"), ("中文", "zh")],
                value=normalise_language(saved.get("language", "en")),
                label=i18n("shell.language"),
                elem_id="shell-language",
                scale=0,
            )
        ctx = UIContext(workspace=workspace, texts=texts, i18n=i18n, lang=lang, store=RunStore(workspace),
                        recipe=recipe, accepts_code=accepts_code)
        ctx.shared["dataset"] = gr.State(saved.get("dataset"))
        ctx.shared["run_id"] = gr.State(saved.get("run_id"))
        # A RunConfig as a dict that Chat's "Train on these votes" hands to the Train form.
        ctx.shared["train_prefill"] = gr.State(None)
        # The Train form's identity_name / identity_author once edited (None before: the form's defaults).
        ctx.shared["identity"] = gr.State(None)
        tabs = []
        with gr.Tabs(elem_id="shell-tabs") as tab_set:
            ctx.shared["tabs"] = tab_set  # a handler returning gr.Tabs(selected=name) switches tabs
            ctx.timers.first_tab = next(iter(modules))
            for name, module in modules.items():
                ctx.timers.building = name
                with gr.Tab(tab_label(name, lang.value), id=name, elem_id=f"tab-{name}") as tab:
                    module.build(ctx)
                tabs.append((name, tab))
            ctx.timers.building = None
        for wire in ctx.after_tabs:
            wire(dict(tabs))
        ctx.timers.wire(dict(tabs))
        run_notice.build(ctx)  # the page title and a notification when a run ends, whichever tab is open
        _wire_language(demo, ctx, tabs)
        # A browser opened the page: import torch & co. now, in the background,
        # so the first click that needs them rarely waits (ui/warmup.py).
        demo.load(start_in_background, api_visibility="private", queue=False)
    demo.i18n_instance = i18n  # gradio's own attribute; launch() must be given it again
    # Serves the run queue with the app's one RunStore (it reaps the workers it starts); app.py
    # starts it once the page answers. Not started here: a UI built in a test starts no runs.
    demo.queue_scheduler = QueueScheduler(ctx.store)
    return demo


def tab_label(name: str, lang: str) -> str:
    # Plain strings set from Python: gradio 6.31 translates an I18n tab label
    # only for the selected tab, so the others would stay in the first language.
    return TEXT[f"shell.tab.{name}"][normalise_language(lang)]


def _wire_language(demo: gr.Blocks, ctx: UIContext, tabs: list[tuple[str, gr.Tab]]) -> None:
    """Page load: saved language, else the browser's; user change: apply and remember."""
    tab_components = [tab for _name, tab in tabs]

    def initial(browser_lang: str) -> str:
        return normalise_language(ctx.saved().get("language") or browser_lang)

    def relabel(value: str) -> list:
        return [gr.Tab(label=tab_label(name, value)) for name, _tab in tabs]

    def remember(value: str) -> list:
        save_settings(ctx.workspace, language=normalise_language(value))
        return relabel(value)

    private = {"api_visibility": "private"}
    demo.load(initial, ctx.lang, ctx.lang, js=BROWSER_LANGUAGE_JS, **private).then(
        relabel, ctx.lang, tab_components, js=APPLY_LANGUAGE_JS, **private
    )
    ctx.lang.input(remember, ctx.lang, tab_components, js=APPLY_LANGUAGE_JS, **private)


def launch_options(
    demo: gr.Blocks, workspace: Workspace, *, share: bool, auth: tuple[str, str] | None, max_file_size: str
) -> dict[str, Any]:
    """gradio launch() keywords: everything a local tool does not need is off."""
    root = str(workspace.root.resolve())
    return {
        "i18n": demo.i18n_instance,
        "share": share,
        "auth": auth,
        "auth_message": "FineTune Studio: sign in with the user and password given to --auth.",
        "max_file_size": max_file_size,
        "allowed_paths": [root],           # the workspace and nothing else
        "enable_monitoring": False,        # no /monitoring endpoint
        "mcp_server": False,
        "run_history": False,              # nothing about the user's calls kept in the browser
        "footer_links": ["settings"],      # no "use via API" link: the documented API lives in docs/
        "ssr_mode": False,                 # no node server: faster start, one process
        "show_error": True,
        "theme": gr.themes.Soft(),
        "css": CSS + CHAT_CSS,
    }
