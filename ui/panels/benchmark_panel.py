"""The Benchmarks section of the Evaluate tab: lm-evaluation-harness tasks run on
the checkpoints ticked above, as a detached `python -m backend.evaluate
--benchmark ...` process (backend/evaluation/benchmarks.py); a table and a
chart against the training step from RUN/eval/<checkpoint>/benchmarks.json.

Handlers are module-level functions over plain values, tested without a
browser; build() only places and wires.
"""

from __future__ import annotations

import html
import math
from functools import partial
from pathlib import Path

import gradio as gr
from plotly.subplots import make_subplots

from backend.evaluation.benchmark_specs import BenchmarkError
from backend.evaluation.benchmark_tasks import BUNDLED
from backend.evaluation.benchmarks import (
    BENCHMARKS_FILE,
    benchmark_progress_path,
    benchmark_table,
    load_benchmarks,
    start_benchmarks,
)
from backend.runs.jobs import COMPLETED, FAILED, RUNNING, read_progress, stage_of
from ui.context import UIContext
from ui.i18n import localize
from ui.local_model_choices import loadable
from ui.texts.benchmark_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)

POLL_EVERY_S = 2.0

# --- handlers (plain values in, component values out) -------------------------

def bundled_choices(ctx: UIContext, lang: str | None) -> list[tuple[str, str]]:
    return [(f"{name}: {ctx.msg(lang, f'bench.task.{name}')}", name) for name in BUNDLED]


def forget_drawn() -> str:
    """Another run was picked: the next tick redraws its results."""
    return ""


def relabel(ctx: UIContext, lang):
    return gr.update(choices=bundled_choices(ctx, lang))


def local_choices(ctx: UIContext):
    """The models on this machine transformers can load, from the scan's cache (never a scan here)."""
    return gr.update(choices=loadable(ctx.workspace.root))


def start(ctx: UIContext, lang, current, checkpoints, bundled, other, limit, chat_template, local=()) -> str:
    """Start the benchmark job for the run (and `local`: paths of models on this machine); the message to show."""

    if not current:
        return ctx.msg(lang, "bench.msg_pick_run")
    tasks = [*(bundled or []), *str(other or "").replace(",", " ").split()]
    try:
        pid = start_benchmarks(ctx.workspace.runs_dir / current, tasks, list(checkpoints or []),
                               int(limit or 0) or None, bool(chat_template), list(local or []),
                               task_files=ctx.accepts_code)
    except BenchmarkError as error:
        return ctx.msg(lang, "bench.msg_error", error=localize(error, lang))
    ctx.remember(run_id=current)
    return ctx.msg(lang, "bench.msg_started", pid=pid)


def poll(ctx: UIContext, lang, current, signature):
    """(progress, table, chart, signature); the table and chart are redrawn only when the result files changed."""
    if not current:
        return "", gr.skip(), gr.skip(), signature
    run_dir = ctx.workspace.runs_dir / current
    bar = progress_html(ctx, lang, run_dir)
    new_signature = _signature(run_dir)
    if new_signature == signature:
        return bar, gr.skip(), gr.skip(), signature
    table, figure = results_view(run_dir)
    return bar, table, figure, new_signature


def results_view(run_dir: Path):
    """(table of every checkpoint's numbers, one chart per task's primary metric against the step)."""
    import pandas as pd

    results = load_benchmarks(run_dir)
    if not results:
        return pd.DataFrame(), None
    rows = [{k: ("–" if v is None else f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items()}
            for row in benchmark_table(results)]  # a model on this machine has no step: "–"
    return pd.DataFrame(rows), _figure(results)


def progress_html(ctx: UIContext, lang: str, run_dir: Path) -> str:
    state = read_progress(benchmark_progress_path(run_dir))
    if state.get("state") == RUNNING:
        done, total = int(state.get("done") or 0), int(state.get("total") or 0)
        text = ctx.msg(lang, "bench.progress", stage=localize(stage_of(state), lang), done=done, total=total or "?")
        return (f'<div id="bench-running"><progress value="{done}" max="{max(total, 1)}" style="width:100%">'
                f'</progress><div>{html.escape(text)}</div></div>')
    if state.get("state") == FAILED:
        error = localize(stage_of(state, "error"), lang)
        return f'<div id="bench-failed">❌ {html.escape(ctx.msg(lang, "bench.failed", error=error))}</div>'
    if state.get("state") == COMPLETED:
        return f'<div id="bench-done">✅ {html.escape(ctx.msg(lang, "bench.done"))}</div>'
    return ""


def _signature(run_dir: Path) -> str:
    folder = run_dir / "eval"
    stamps = [f"{p.parent.name}:{p.stat().st_mtime_ns}" for p in sorted(folder.glob(f"*/{BENCHMARKS_FILE}"))] \
        if folder.is_dir() else []
    return ";".join(stamps) or "none"


def _figure(results: dict):
    series: dict[str, list[tuple[int, float, str]]] = {}
    lines: dict[str, list[tuple[float, str]]] = {}  # models on this machine have no step: a level to compare with
    for name, record in results.items():
        for task, entry in record["tasks"].items():
            value = (entry.get("metrics") or {}).get(entry.get("primary"))
            if isinstance(value, (int, float)) and math.isfinite(value):
                key = f"{task} {entry.get('primary')}"
                if record.get("step") is None:
                    lines.setdefault(key, []).append((value, name))
                    series.setdefault(key, [])
                else:
                    series.setdefault(key, []).append((record.get("step", 0), value, name))
    if not series:
        return None
    cols = min(3, len(series))
    figure = make_subplots(rows=math.ceil(len(series) / cols), cols=cols, subplot_titles=list(series))
    for i, points in enumerate(series.values()):
        points.sort()
        figure.add_scatter(x=[p[0] for p in points], y=[p[1] for p in points], text=[p[2] for p in points],
                           mode="lines+markers", hovertemplate="%{text}: %{y:.4g}<extra></extra>", showlegend=False,
                           row=i // cols + 1, col=i % cols + 1)
    for i, key in enumerate(series):
        for value, name in lines.get(key, []):
            figure.add_hline(y=value, line_dash="dash", line_color="gray", annotation_text=name,
                             row=i // cols + 1, col=i % cols + 1)
    if all(0 <= v <= 1 for v in [p[1] for ps in series.values() for p in ps] + [v for ls in lines.values() for v, _ in ls]):
        figure.update_yaxes(range=[0, 1.05])  # shares: the same scale in every panel (a perplexity keeps its own)
    figure.update_xaxes(title_text="step")
    figure.update_layout(height=280 * math.ceil(len(series) / cols), margin={"l": 30, "r": 10, "t": 40, "b": 30})
    return figure


# --- layout -------------------------------------------------------------------

def build(ctx: UIContext, run, checkpoints) -> None:
    """Below the Evaluate tab's metrics: uses its run dropdown and ticked checkpoints."""
    private = {"api_visibility": "private"}
    with gr.Accordion(ctx.t("bench.title"), open=True, elem_id="bench"):
        bundled = gr.CheckboxGroup(label=ctx.t("bench.bundled"), choices=bundled_choices(ctx, "en"),
                                   value=["studio_facts_choice"], elem_id="bench-bundled")
        with gr.Row(equal_height=True):
            other = gr.Textbox(label=ctx.t("bench.other"), placeholder="hellaswag  my_tasks/quiz.yaml", scale=3,
                               elem_id="bench-other")
            limit = gr.Number(label=ctx.t("bench.limit"), value=0, minimum=0, precision=0, elem_id="bench-limit")
            chat_template = gr.Checkbox(label=ctx.t("bench.chat_template"), value=True, elem_id="bench-chat-template")
        local = gr.Dropdown(label=ctx.t("bench.local"), info=ctx.t("bench.local_info"), choices=[], value=[],
                            multiselect=True, allow_custom_value=True, elem_id="bench-local")
        go = gr.Button(ctx.t("bench.start"), variant="primary", elem_id="bench-start")
        status = gr.Markdown(elem_id="bench-status")
        progress = gr.HTML(elem_id="bench-progress")
        gr.Markdown(ctx.t("bench.about"), elem_id="bench-about")
        table = gr.Dataframe(label=ctx.t("bench.table"), interactive=False, elem_id="bench-table")
        chart = gr.Plot(label=ctx.t("bench.chart"), elem_id="bench-chart")
    seen = gr.State("")
    go.click(partial(start, ctx), [ctx.lang, run, checkpoints, bundled, other, limit, chat_template, local], status,
             **private)
    gr.context.Context.root_block.load(partial(local_choices, ctx), None, local, **private)
    run.change(partial(local_choices, ctx), None, local, **private)  # a scan that ended since the page opened
    outputs = [progress, table, chart, seen]
    run.change(forget_drawn, None, seen, **private)
    ctx.timers.poll(POLL_EVERY_S, partial(poll, ctx), [ctx.lang, run, seen], outputs)
    ctx.lang.change(partial(relabel, ctx), ctx.lang, bundled, **private)
