"""Models on this machine, beside a model picker: the models other tools keep on disk
(backend/models/local/), scanned in the background and cached in the workspace.

The picker (a gr.Dropdown) gets the trainable ones after its own choices, labelled
"name · source · size"; a dropdown cannot grey an entry out, so the whole list, the untrainable
ones with their reason, is a table in the accordion beside it, with Rescan. A GGUF one passes its
file's path: the run's model stage converts it once into the workspace (backend/models/gguf_source.py),
never into the other tool's folder. Handlers are plain functions (tests/test_ui_local_models.py).
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from backend.models.local.cli import human_count, human_size
from backend.models.local.places import SOURCE_LABELS
from backend.models.local.scan import ScanResult, scanning, start_background_scan
from ui.context import UIContext
from ui.i18n import localize
from ui.local_model_choices import found, label, places_of
from ui.texts.local_models_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)

TICK_S = 1.0
SKIPPED_SHOWN = 20  # the rest are counted; `python -m backend.models list` prints all of them


COLUMNS = ("name", "source", "size", "architecture", "parameters", "quantisation", "licence", "fits", "trainable")


def say(lang: str, key: str, **values) -> str:
    """One of TEXT in `lang`, formatted (handlers return text, not I18n placeholders)."""
    text = TEXT[key].get(lang) or TEXT[key]["en"]
    return text.format(**values) if values else text


def choices(root: Path, base: list) -> list:
    """The picker's choices: its own, then each trainable model found, as (label, path)."""
    result = found(root)
    models = result.models if result else []
    own = {value for _, value in base}
    return [*base, *[(label(m), m.path) for m in models if m.trainable and m.path not in own]]


def view(root: Path, lang: str) -> tuple[str, str, bool]:
    """(status line, table and skipped list in Markdown, keep polling)."""
    running = scanning(root)
    result = found(root)
    if running is not None:
        return say(lang, "local.scanning", found=running), table(result, lang) if result else "", True
    if result is None:
        return say(lang, "local.not_scanned"), "", False
    status = say(lang, "local.summary", count=len(result.models), seconds=round(result.seconds, 1),
                trainable=sum(m.trainable for m in result.models))
    if result.stopped_early:
        status += "\n\n" + say(lang, "local.stopped_early")
    return status, table(result, lang), False


def table(result: ScanResult, lang: str) -> str:
    lines = []
    if result.models:
        lines += ["| " + " | ".join(say(lang, f"local.col.{c}") for c in COLUMNS) + " |",
                  "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(_cell(v) for v in _row(m, lang)) + " |" for m in result.models]
    else:
        lines.append(say(lang, "local.none"))
    if result.skipped:
        lines += ["", say(lang, "local.skipped", count=len(result.skipped))]
        lines += [f"- `{path}`: {localize(reason, lang)}" for path, reason in result.skipped[:SKIPPED_SHOWN]]
        if len(result.skipped) > SKIPPED_SHOWN:
            lines.append(say(lang, "local.skipped_more", count=len(result.skipped) - SKIPPED_SHOWN))
    return "\n".join(lines)


def _row(m, lang: str) -> list[str]:
    unknown = say(lang, "local.unknown")
    fits = unknown if m.fits is None else say(lang, "local.fits" if m.fits else "local.too_big",
                                             gb=m.memory_gb, device=m.device)
    trainable = say(lang, "local.yes") if m.trainable else f"{say(lang, 'local.no')}: {localize(m.reason, lang)}"
    return [m.name, SOURCE_LABELS.get(m.source, m.source), human_size(m.size), m.architecture or unknown,
            human_count(m.parameters), m.quantisation or unknown, m.licence or unknown, fits, trainable]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def refresh(root: Path, lang: str, base: list, rescan: bool = False) -> tuple:
    """Starts a scan when asked or when none was ever cached (and none runs); then the view and the
    picker's choices. (status, table, timer, picker)."""
    if rescan or found(root) is None:
        start_background_scan(root, places_of(root))  # none when one runs already
    return poll(root, lang, base)


def ensure_scan(root: Path):
    """Starts a background scan when none was ever cached and none runs (for the pickers of other tabs,
    which read the cache); its thread, or None."""
    return start_background_scan(root, places_of(root)) if found(root) is None else None


def poll(root: Path, lang: str, base: list) -> tuple:
    status, shown, running = view(root, lang)
    return status, shown, gr.Timer(active=running), gr.update(choices=choices(root, base))


def build(ctx: UIContext, picker=None, base: list | None = None) -> None:
    """The accordion under `picker` (a model gr.Dropdown, whose choices are `base`), or alone."""
    root, base = ctx.workspace.root, list(base or [])
    private = {"api_visibility": "private"}
    with gr.Accordion(ctx.t("local.title"), open=False, elem_id="local-models"):
        gr.Markdown(ctx.t("local.intro"))
        with gr.Row():
            status = gr.Markdown(elem_id="local-models-status")
            rescan = gr.Button(ctx.t("local.rescan"), size="sm", scale=0, elem_id="local-models-rescan")
        shown = gr.Markdown(elem_id="local-models-table")
    timer = gr.Timer(TICK_S, active=False)
    outputs = [status, shown, timer, picker if picker is not None else gr.State()]
    gr.context.Context.root_block.load(lambda lang: refresh(root, lang, base), ctx.lang, outputs, **private)
    rescan.click(lambda lang: refresh(root, lang, base, rescan=True), ctx.lang, outputs, **private)
    timer.tick(lambda lang: poll(root, lang, base), ctx.lang, outputs, show_progress="hidden", **private)
