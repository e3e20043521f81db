"""Evaluate tab: score the base model and checkpoints of a run on its held-out
split or an uploaded file; table, chart against the training step, and the
predictions side by side.

The evaluation runs as a detached `python -m backend.evaluate` process; this
tab only starts it and polls RUN/eval/progress.json and the result files, so
closing the browser or restarting the app loses nothing.
"""

from __future__ import annotations

import hashlib
import html
import math
import shutil
from functools import partial
from pathlib import Path

import gradio as gr
from plotly.subplots import make_subplots

from backend.evaluation.evaluator import evaluation_progress_path, start_evaluation
from backend.evaluation.results import (
    best_per_metric,
    checkpoint_choices,
    default_checkpoint,
    disagreement_rows,
    load_results,
    training_eval_curve,
)
from backend.evaluation.scoring import EvalError
from backend.runs.files import BASE, list_run_ids
from backend.runs.jobs import COMPLETED, FAILED, RUNNING, read_progress, stage_of
from backend.scoring.errors import ScorerError
from backend.scoring.scorer_specs import specs_from_text
from ui.context import UIContext
from ui.i18n import localize
from ui.panels import benchmark_panel, judge_panel, learning_panel
from ui.panels.kept_panel import build_evaluate as build_kept
from ui.run_choice import refreshed_checkpoints, run_dropdown
from ui.texts.evaluate_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)

POLL_EVERY_S = 2.0
UPLOAD_SUFFIXES = (".json", ".jsonl", ".csv", ".tsv", ".parquet")
METRIC_LABELS = {"eval_loss": "eval loss", "perplexity": "perplexity", "bleu": "BLEU", "rouge1": "ROUGE-1",
                 "rouge2": "ROUGE-2", "rougeL": "ROUGE-L", "exact_match": "exact match %",
                 "preference_accuracy": "preference accuracy", "mean_margin": "mean margin",
                 "logp_accuracy": "log-prob accuracy"}

# --- handlers (plain values in, component values out) -------------------------

def refresh_runs(ctx: UIContext, lang, current):
    """(run list, checkpoint choices, status message, drawn-results signature reset)."""
    ids = list_run_ids(ctx.workspace.runs_dir)
    run, current = run_dropdown(ids, current)
    choices, chosen = _checkpoint_choices(ctx.workspace.runs_dir, current)
    message = "" if ids else ctx.msg(lang, "evaluate.msg_no_runs")
    return run, gr.update(choices=choices, value=chosen), message, ""


def on_load(ctx: UIContext, lang, remembered):
    """The page opened: the run chosen elsewhere (Runs tab) or last time, if it still exists."""
    ids = list_run_ids(ctx.workspace.runs_dir)
    return refresh_runs(ctx, lang, remembered if remembered in ids else None)


def on_shared_run(ctx: UIContext, lang, shared, shown):
    """The run opened elsewhere (the Runs tab's list, also at page load): the tab follows it, but
    leaves the checkpoints the user ticked when it is the run already shown."""
    if shared == shown:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    return on_load(ctx, lang, shared)


def on_run(ctx: UIContext, current):
    choices, chosen = _checkpoint_choices(ctx.workspace.runs_dir, current)
    return gr.update(choices=choices, value=chosen), ""


def start_eval(ctx: UIContext, lang, current, chosen, source_kind, upload_path, samples, new_tokens,
               scorers_text: str | None = None) -> str:
    """Start `python -m backend.evaluate` for the run in the background; the message to show.
    `scorers_text`: the scorers typed as YAML / JSON (checked here, before anything starts)."""

    if not current:
        return ctx.msg(lang, "evaluate.msg_pick_run")
    run_dir = ctx.workspace.runs_dir / current
    data = None
    if source_kind == "file":
        if not upload_path:
            return ctx.msg(lang, "evaluate.msg_no_file")
        suffix = Path(upload_path).suffix.lower()
        if suffix not in UPLOAD_SUFFIXES:
            return ctx.msg(lang, "evaluate.msg_bad_suffix", suffixes=", ".join(UPLOAD_SUFFIXES))
        data = _keep_upload(run_dir, Path(upload_path), suffix)
    try:
        specs = specs_from_text(scorers_text)  # text only: a typed file name is not read from the disk
        pid = start_evaluation(run_dir, list(chosen or []), data, int(samples or 0) or None, int(new_tokens),
                               scorers=specs)
    except (EvalError, ScorerError) as error:
        return ctx.msg(lang, "evaluate.msg_error", error=localize(error, lang))
    ctx.remember(run_id=current)
    return ctx.msg(lang, "evaluate.msg_started", pid=pid)


def poll(ctx: UIContext, lang, current, only_disagree, signature):
    """(progress bar, results table, chart, predictions, signature): the results are
    redrawn only when their files changed since `signature` (a timer tick is cheap)."""
    if not current:
        return "", gr.skip(), gr.skip(), gr.skip(), signature
    run_dir = ctx.workspace.runs_dir / current
    bar = _progress_html(ctx, lang, run_dir)
    new_signature = _signature(run_dir) + f"|{only_disagree}"
    if new_signature == signature:
        return bar, gr.skip(), gr.skip(), gr.skip(), signature
    frame, figure, rows = _results(run_dir, only_disagree)
    return bar, frame, figure, rows, new_signature


def redraw(ctx: UIContext, lang, current, only_disagree):
    return poll(ctx, lang, current, only_disagree, "")


# --- layout -------------------------------------------------------------------

def build(ctx: UIContext) -> None:
    with gr.Row(equal_height=True):
        run = gr.Dropdown(label=ctx.t("evaluate.run"), choices=[], scale=3, elem_id="evaluate-run")
        refresh = gr.Button(ctx.t("evaluate.refresh"), scale=0, elem_id="evaluate-refresh")
    checkpoints = gr.CheckboxGroup(label=ctx.t("evaluate.checkpoints"), choices=[], elem_id="evaluate-checkpoints")
    with gr.Row(equal_height=True):
        source = gr.Radio(label=ctx.t("evaluate.source"), value="split", elem_id="evaluate-source",
                          choices=[(ctx.t("evaluate.source_split"), "split"), (ctx.t("evaluate.source_file"), "file")])
        upload = gr.File(label=ctx.t("evaluate.file"), file_types=list(UPLOAD_SUFFIXES), type="filepath",
                         elem_id="evaluate-file")
        max_samples = gr.Number(label=ctx.t("evaluate.max_samples"), value=50, minimum=0, precision=0,
                                elem_id="evaluate-max-samples")
        max_new = gr.Slider(8, 1024, value=64, step=8, label=ctx.t("evaluate.max_new_tokens"),
                            elem_id="evaluate-max-new")
    scorers = gr.Textbox(label=ctx.t("evaluate.scorers"), info=ctx.t("evaluate.scorers_info"), lines=3,
                         placeholder="- {kind: contains, text: Paris}\n- {kind: number, tolerance: 0.01}",
                         elem_id="evaluate-scorers")
    start = gr.Button(ctx.t("evaluate.start"), variant="primary", elem_id="evaluate-start")
    status = gr.Markdown(elem_id="evaluate-status")
    progress = gr.HTML(elem_id="evaluate-progress")
    gr.Markdown(ctx.t("evaluate.about"), elem_id="evaluate-about")
    table = gr.Dataframe(label=ctx.t("evaluate.results"), interactive=False, elem_id="evaluate-table")
    learning_panel.build_evaluate(ctx, run)  # learned / kept / ended per checkpoint
    build_kept(ctx, run)  # a run that continues another: both side by side
    chart = gr.Plot(label=ctx.t("evaluate.chart"), elem_id="evaluate-chart")
    disagree = gr.Checkbox(label=ctx.t("evaluate.disagree_only"), value=True, elem_id="evaluate-disagree")
    predictions = gr.Dataframe(label=ctx.t("evaluate.predictions"), interactive=False, wrap=True,
                               elem_id="evaluate-predictions")
    seen = gr.State("")  # signature of the result files last drawn: redraw only when they change
    benchmark_panel.build(ctx, run, checkpoints)  # its own module: lm-evaluation-harness on the same checkpoints
    judge_panel.build(ctx, run)  # a judge model: pairwise, graded, against the votes (backend/judge/)

    private = {"api_visibility": "private"}
    outputs = [progress, table, chart, predictions, seen]
    listed = [run, checkpoints, status, seen]
    view = {"fn": partial(redraw, ctx), "inputs": [ctx.lang, run, disagree], "outputs": outputs, **private}
    refresh.click(partial(refresh_runs, ctx), [ctx.lang, run], listed, **private).then(**view)
    run.input(partial(on_run, ctx), run, [checkpoints, seen], **private).then(**view)
    start.click(partial(start_eval, ctx), [ctx.lang, run, checkpoints, source, upload, max_samples, max_new, scorers],
                status, **private)
    disagree.change(**view)
    ctx.timers.poll(POLL_EVERY_S, partial(poll, ctx), [ctx.lang, run, disagree, seen], outputs)
    listed_seen = gr.State(None)  # the checkpoints (and default) the last look found
    ctx.timers.poll(POLL_EVERY_S, partial(refresh_checkpoints, ctx), [run, checkpoints, listed_seen],
                    [checkpoints, listed_seen])
    # The run chosen elsewhere (Runs tab) or last time.
    shared_run = ctx.shared.get("run_id")
    load_inputs = [ctx.lang, shared_run] if shared_run is not None else [ctx.lang, run]
    _on_page_load(partial(on_load, ctx), load_inputs, listed, view)
    if shared_run is not None:
        shared_run.change(partial(on_shared_run, ctx), [ctx.lang, shared_run, run], listed, **private).then(**view)


def _on_page_load(fn, inputs, outputs, then: dict) -> None:
    """Fill the tab when the page loads (the Blocks is the enclosing context)."""
    from gradio.context import Context

    Context.root_block.load(fn, inputs, outputs, api_visibility="private").then(**then)


def _checkpoint_choices(runs_dir: Path, run_id: str | None) -> tuple[list[str], list[str]]:
    if not run_id or not (runs_dir / run_id).is_dir():
        return [], []
    choices = checkpoint_choices(runs_dir / run_id)
    return choices, _default(runs_dir, run_id, choices)


def _default(runs_dir: Path, run_id: str, choices: list[str]) -> list[str]:
    """The base, the best checkpoint and the newest (final/ when complete), in the list's order."""
    wanted = {BASE, default_checkpoint(runs_dir / run_id), *choices[-1:]}
    return [name for name in choices if name in wanted]


def refresh_checkpoints(ctx: UIContext, current, chosen, seen):
    """(checkpoint list, what was seen): a timer's look at the run's checkpoints, so the list does not
    stay as it was when the page opened while the run goes on and ends (run_choice.refreshed_checkpoints)."""
    choices, default = _checkpoint_choices(ctx.workspace.runs_dir, current)
    return refreshed_checkpoints(choices, default, chosen, seen)


def _keep_upload(run_dir: Path, upload: Path, suffix: str) -> Path:
    """Copy the upload into the run's eval folder under a content-hash name (never the user's file name)."""
    digest = hashlib.sha256(upload.read_bytes()).hexdigest()[:16]
    target = run_dir / "eval" / "uploads" / f"{digest}{suffix}"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        shutil.copyfile(upload, target)
    return target


def _signature(run_dir: Path) -> str:
    folder = run_dir / "eval"
    if not folder.is_dir():
        return "none"
    stamps = [f"{p.parent.name}:{p.stat().st_mtime_ns}" for p in sorted(folder.glob("*/metrics.json"))]
    return ";".join(stamps) or "none"


def _progress_html(ctx: UIContext, lang: str, run_dir: Path) -> str:
    state = read_progress(evaluation_progress_path(run_dir))
    if not state:
        return ""
    if state.get("state") == RUNNING:
        done, total = int(state.get("done") or 0), int(state.get("total") or 0)
        text = ctx.msg(lang, "evaluate.progress", stage=localize(stage_of(state), lang), done=done, total=total or "?")
        return (f'<div id="evaluate-running"><progress value="{done}" max="{max(total, 1)}" '
                f'style="width:100%"></progress><div>{_escape(text)}</div></div>')
    if state.get("state") == FAILED:
        return f'<div id="evaluate-failed">❌ {_escape(ctx.msg(lang, "evaluate.failed", error=localize(stage_of(state, "error"), lang)))}</div>'
    if state.get("state") == COMPLETED:
        return f'<div id="evaluate-done">✅ {_escape(ctx.msg(lang, "evaluate.done"))}</div>'
    return ""


def _escape(text: str) -> str:
    return html.escape(str(text))


def _results(run_dir: Path, only_disagree: bool):
    """(metrics table, plotly figure, predictions table) from the run's eval folder."""
    import pandas as pd

    results = load_results(run_dir)
    if not results:
        return pd.DataFrame(), None, pd.DataFrame()
    best = best_per_metric(results)
    rows = []
    for name, metrics in results.items():
        row = {"checkpoint": name, "step": metrics.get("step"), "samples": metrics.get("num_samples")}
        for key, label in METRIC_LABELS.items():
            value = metrics.get(key)
            text = f"{value:.4g}" if isinstance(value, (int, float)) and math.isfinite(value) else "–"
            row[label] = f"★ {text}" if best.get(key) == name else text
        row.update(scorer_columns(metrics))
        row["data"] = metrics.get("data", "")
        rows.append(row)
    table = disagreement_rows(run_dir, list(results))
    if only_disagree:
        table = [r for r in table if r["distinct"] > 1]
    columns = ["index", "prompt", "reference", *results.keys(), "distinct"]
    predictions = pd.DataFrame([{c: r.get(c, "") for c in columns} for r in table], columns=columns)
    frame = pd.DataFrame(rows).fillna("–")  # a checkpoint scored without a scorer the others have
    return frame, _figure(run_dir, results, best), predictions


def scorer_columns(metrics: dict) -> dict[str, str]:
    """The share of rows passing each chosen scorer, as "✓ <name>" columns of the results table."""
    return {f"✓ {name}": "–" if entry.get("pass") is None else f"{entry['pass']:.0%}"
            for name, entry in (metrics.get("scorers") or {}).items()}


def _figure(run_dir: Path, results: dict, best: dict):
    keys = list(METRIC_LABELS)
    figure = make_subplots(rows=math.ceil(len(keys) / 4), cols=4, subplot_titles=[METRIC_LABELS[k] for k in keys], horizontal_spacing=0.06)
    curve = training_eval_curve(run_dir)
    for i, key in enumerate(keys):
        row, col = i // 4 + 1, i % 4 + 1
        points = [(m.get("step", 0), m.get(key), name) for name, m in results.items()
                  if isinstance(m.get(key), (int, float)) and math.isfinite(m[key])]
        if key == "eval_loss" and curve:
            figure.add_scatter(x=[s for s, _ in curve], y=[v for _, v in curve], mode="lines", name="training eval_loss",
                               line={"dash": "dot", "color": "gray"}, row=row, col=col)
        figure.add_scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines+markers", name=key,
                           text=[p[2] for p in points], hovertemplate="%{text}: %{y:.4g}<extra></extra>",
                           showlegend=False, row=row, col=col)
        winner = [p for p in points if p[2] == best.get(key)]
        if winner:
            figure.add_scatter(x=[winner[0][0]], y=[winner[0][1]], mode="markers", showlegend=False,
                               marker={"symbol": "star", "size": 14, "color": "gold"}, row=row, col=col)
    figure.update_layout(height=260 * math.ceil(len(keys) / 4), margin={"l": 30, "r": 10, "t": 40, "b": 30}, legend={"orientation": "h"})
    figure.update_xaxes(title_text="step", row=2)
    return figure
