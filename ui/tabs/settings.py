"""Settings tab: what belongs to this workspace rather than to one run.

Each section is a panel module of its own (its TEXT and build(ctx)), listed in SECTIONS;
this tab only lays them out in order.
"""

from __future__ import annotations

from types import ModuleType

import gradio as gr

from ui.context import UIContext
from ui.i18n import merge_texts
from ui.panels import model_folders_panel, notify_panel
from ui.texts import settings_texts

# The panels shown here, in order: each exposes TEXT and build(ctx).
SECTIONS: tuple[ModuleType, ...] = (notify_panel, model_folders_panel)

TEXT: dict[str, dict[str, str]] = merge_texts(
    settings_texts.TEXT,
    *(section.TEXT for section in SECTIONS),
)


def build(ctx: UIContext) -> None:
    gr.Markdown(ctx.t("settings.intro"))
    for section in SECTIONS:
        section.build(ctx)
