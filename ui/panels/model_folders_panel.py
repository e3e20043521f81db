"""Settings → Model folders: more folders the model scan reads (backend/models/local/), one per line,
kept under "model_folders" in the workspace's settings.json, with what the last scan skipped and why.
Saving rescans in the background, so the Train tab's list follows. Handlers are plain functions
(tests/test_ui_local_models.py)."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from backend.models.local.places import FOLDERS_KEY, parse_folders, saved_folders
from backend.models.local.scan import start_background_scan
from ui.context import UIContext
from ui.i18n import localize
from ui.panels import local_models_panel
from ui.texts.model_folders_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)


def say(lang: str, key: str, **values) -> str:
    text = TEXT[key].get(lang) or TEXT[key]["en"]
    return text.format(**values) if values else text


def saved_text(ctx: UIContext) -> str:
    return "\n".join(saved_folders(ctx.workspace.root))


def save(ctx: UIContext, lang: str, text: str) -> tuple[str, str]:
    """Keeps the folders, rescans; (message, the skipped list)."""
    folders = parse_folders(text)
    ctx.remember(**{FOLDERS_KEY: folders or None})
    root = ctx.workspace.root
    start_background_scan(root, local_models_panel.places_of(root))  # none when one runs already
    message = say(lang, "settings.folders.saved", count=len(folders))
    missing = [f for f in folders if not Path(f).expanduser().is_dir()]
    if missing:
        message += " " + say(lang, "settings.folders.missing", paths=", ".join(missing))
    return message, skipped_view(ctx, lang)


def skipped_view(ctx: UIContext, lang: str) -> str:
    """What the last finished scan skipped, each with its reason."""
    result = local_models_panel.found(ctx.workspace.root)
    if result is None:
        return local_models_panel.say(lang, "local.not_scanned")
    if not result.skipped:
        return say(lang, "settings.folders.no_skips")
    return "\n".join([local_models_panel.say(lang, "local.skipped", count=len(result.skipped)),
                      *(f"- `{path}`: {localize(reason, lang)}" for path, reason in result.skipped)])


def build(ctx: UIContext) -> None:
    private = {"api_visibility": "private"}
    with gr.Accordion(ctx.t("settings.folders.title"), open=True, elem_id="settings-model-folders"):
        box = gr.Textbox(label=ctx.t("settings.folders.box"), info=ctx.t("settings.folders.info"), lines=3,
                         elem_id="settings-model-folders-box")
        button = gr.Button(ctx.t("settings.folders.save"), size="sm", elem_id="settings-model-folders-save")
        message = gr.Markdown(elem_id="settings-model-folders-message")
        skipped = gr.Markdown(elem_id="settings-model-folders-skipped")
    root_block = gr.context.Context.root_block
    root_block.load(lambda: saved_text(ctx), None, box, **private)
    root_block.load(lambda lang: skipped_view(ctx, lang), ctx.lang, skipped, **private)
    button.click(lambda lang, text: save(ctx, lang, text), [ctx.lang, box], [message, skipped], **private)
