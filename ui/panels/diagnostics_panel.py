"""The Runs tab's Diagnostics accordion: one click writes the watched run's diagnostics zip
(backend/runs/diagnose.py) under workspace/diagnostics/, shows what it holds (each file, its size, what was
redacted) and offers it for download, so a bug report carries logs, versions and hardware without secrets.

Handlers are plain functions (tests/test_ui_diagnostics.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import gradio as gr

from backend.runs.diagnose import DiagnoseError, DiagnosticsReport, diagnostics_zip
from ui.context import UIContext
from ui.i18n import localize
from ui.texts.diagnostics_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)


def app_argv() -> list[str] | None:
    """The app's command line when this process is app.py (its flags go into system.json, redacted)."""
    return list(sys.argv) if sys.argv and Path(sys.argv[0]).name == "app.py" else None


def make_zip(ctx: UIContext, lang: str | None, run_id: str | None) -> tuple[str, str | None]:
    """(what the zip holds as markdown, its path to download), or (why not, None)."""
    if not run_id:
        return ctx.msg(lang, "runs.diag.pick"), None
    try:
        report = diagnostics_zip(ctx.workspace, run_id, app_argv=app_argv())
    except DiagnoseError as error:
        return ctx.msg(lang, "runs.diag.error", error=localize(error, lang)), None
    return manifest_markdown(ctx, lang, report), str(report.path)


def manifest_markdown(ctx: UIContext, lang: str | None, report: DiagnosticsReport) -> str:
    def t(key: str, **values) -> str:
        return ctx.msg(lang, key, **values)

    total = report.path.stat().st_size
    lines = [t("runs.diag.made", name=report.path.name, count=len(report.files) + 1, size=_size(total)), "",
             f"| {t('runs.diag.col.file')} | {t('runs.diag.col.size')} | {t('runs.diag.col.holds')} | "
             f"{t('runs.diag.col.redacted')} |", "|---|---:|---|---|"]
    for entry in report.files:
        name = entry["name"]
        holds = f"runs.diag.holds.{name}" + (".tail" if entry["source"] != name and name == "train.log" else "")
        removed = ", ".join(f"{_kind(ctx, lang, k)} ×{n}" for k, n in entry["redacted"].items())
        lines.append(f"| `{name}` | {_size(entry['bytes'])} | {t(holds) if holds in ctx.texts else entry['source']} | "
                     f"{removed or t('runs.diag.nothing')} |")
    if report.missing:
        lines += ["", t("runs.diag.missing", files=", ".join(f"`{m}`" for m in report.missing))]
    if report.redacted_env:
        lines += ["", t("runs.diag.env", names=", ".join(f"`{n}`" for n in report.redacted_env))]
    return "\n".join(lines)


def _kind(ctx: UIContext, lang: str | None, kind: str) -> str:
    key = f"runs.diag.kind.{kind}"
    return ctx.msg(lang, key) if key in ctx.texts else kind


def _size(count: int) -> str:
    return f"{count} B" if count < 1024 else f"{count / 1024:.1f} KiB" if count < 2**20 else f"{count / 2**20:.1f} MiB"


def build(ctx: UIContext, select) -> None:
    """The accordion under the run picker `select`."""
    with gr.Accordion(ctx.t("runs.diag.title"), open=False, elem_id="runs-diagnostics"):
        gr.Markdown(ctx.t("runs.diag.about"))
        button = gr.Button(ctx.t("runs.diag.make"), elem_id="runs-diagnostics-make")
        shown = gr.Markdown(elem_id="runs-diagnostics-manifest")
        download = gr.File(label=ctx.t("runs.diag.file"), interactive=False, elem_id="runs-diagnostics-file")
    button.click(lambda lang, run_id: make_zip(ctx, lang, run_id), [ctx.lang, select], [shown, download],
                 api_visibility="private")
