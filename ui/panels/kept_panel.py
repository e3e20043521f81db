"""Quality kept after a stage that continues another run, in two tabs: the
Evaluate tab's side-by-side table (the parent's checkpoint and this run's
checkpoints on the same held-out rows) and the Runs tab's drop flags.

Both read RUN/eval/kept.json (backend/evaluation/quality_kept.py) and judge it
with backend/evaluation/quality_drops.py; each has its own timer, so the tabs'
own polling is untouched. Handlers are plain functions over plain values
(tests/test_quality_kept.py).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import gradio as gr

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.evaluation.quality_drops import benchmark_pairs, drops, metrics_beside_parent, run_drops
from backend.evaluation.quality_kept import load_kept, parent_of
from backend.messages import UserError, msg
from ui.context import UIContext
from ui.i18n import localize
from ui.run_choice import run_folder
from ui.texts.kept_panel_texts import EVALUATE_TEXT, RUNS_TEXT  # noqa: F401  (read here by the shell and the tabs)

TICK_S = 3.0


# --- handlers -------------------------------------------------------------------

def kept_poll(ctx: UIContext, lang, run_id, signature):
    """(note, table, signature): redrawn only when the run, the language or kept.json changed."""
    run_dir = _run_dir(ctx, run_id)
    kept_file = run_dir / "eval" / "kept.json" if run_dir else None
    stamp = kept_file.stat().st_mtime_ns if kept_file and kept_file.is_file() else 0
    new_signature = f"{run_id}|{lang}|{stamp}"
    if new_signature == signature:
        return gr.skip(), gr.skip(), signature
    return (*kept_view(ctx, lang, run_id), new_signature)


def kept_view(ctx: UIContext, lang, run_id):
    """(note markdown, side-by-side table) for the Evaluate tab; both hidden for a run that
    continues no other."""
    import pandas as pd

    run_dir = _run_dir(ctx, run_id)
    if run_dir is None or not _continues(run_dir):
        return gr.update(visible=False), gr.update(visible=False)
    kept = load_kept(run_dir)
    if not kept:
        return gr.update(value=ctx.msg(lang, "evaluate.kept.none"), visible=True), gr.update(visible=False)
    benchmarks = benchmark_pairs(run_dir, kept)
    columns, rows = metrics_beside_parent(kept, benchmarks)
    columns = [ctx.msg(lang, "evaluate.kept.metric"), ctx.msg(lang, "evaluate.kept.parent",
                                                              label=kept["parent"]["label"]), *columns[2:]]
    frame = pd.DataFrame([[row[0], *(f"{v:.4g}" if isinstance(v, (int, float)) else "–" for v in row[1:])]
                          for row in rows], columns=columns)
    settings = kept.get("settings") or {}
    lines = [ctx.msg(lang, "evaluate.kept.about"),
             ctx.msg(lang, "evaluate.kept.rows", rows=kept.get("num_samples"), data=_data_label(kept, lang),
                     max_new_tokens=settings.get("max_new_tokens"))]
    flagged = drops(kept, benchmarks=benchmarks)
    lines += [f"⚠️ {localize(m, lang)}" for m in flagged] or [ctx.msg(lang, "evaluate.kept.no_drop")]
    return gr.update(value="\n\n".join(lines), visible=True), gr.update(value=frame, visible=True)


def run_flags(ctx: UIContext, lang, run_id) -> str:
    """The Runs tab's flags for the watched run: one line per drop, a hint when a continuing run
    was never compared, else nothing."""

    run_dir = _run_dir(ctx, run_id)
    if run_dir is None or not _continues(run_dir):
        return ""
    if load_kept(run_dir) is None:
        parent = _parent_label(run_dir)
        return ctx.msg(lang, "runs.kept.not_compared", parent=parent) if parent else ""
    return "\n\n".join(ctx.msg(lang, "runs.kept.drop", sentence=localize(m, lang)) for m in run_drops(run_dir))


def _data_label(kept: dict, lang) -> str:
    if (kept.get("settings") or {}).get("parent_split") and kept["parent"].get("run"):
        return localize(msg("kept.data.parent_split", run=kept["parent"]["run"]), lang)
    return localize(msg("kept.data.own_pairs"), lang)


def _run_dir(ctx: UIContext, run_id) -> Path | None:
    return run_folder(ctx.workspace, run_id)


def _continues(run_dir: Path) -> bool:
    try:
        return bool(RunConfig.load(run_dir / "config.yaml").init_adapter)
    except ConfigError:
        return False


def _parent_label(run_dir: Path) -> str | None:
    try:
        parent = parent_of(run_dir)
    except UserError:
        return None
    return parent.label if parent else None


# --- layout -----------------------------------------------------------------------

def build_evaluate(ctx: UIContext, run) -> None:
    """The side-by-side section under the Evaluate tab's results; hidden for a run without a parent."""
    private = {"api_visibility": "private"}
    with gr.Accordion(ctx.t("evaluate.kept.title"), open=True):
        note = gr.Markdown(visible=False, elem_id="evaluate-kept-note")
        table = gr.Dataframe(interactive=False, visible=False, elem_id="evaluate-kept-table")
    seen = gr.State("")
    poll = partial(kept_poll, ctx)
    run.change(poll, [ctx.lang, run, seen], [note, table, seen], show_progress="hidden", **private)
    ctx.timers.poll(TICK_S, poll, [ctx.lang, run, seen], [note, table, seen])


def build_runs(ctx: UIContext, select) -> None:
    """The drop flags of the watched run, under the Runs tab's alert."""
    private = {"api_visibility": "private"}
    flags = gr.Markdown(elem_id="runs-kept")
    view = partial(run_flags, ctx)
    select.change(view, [ctx.lang, select], flags, **private)
    ctx.timers.poll(TICK_S, view, [ctx.lang, select], flags)
