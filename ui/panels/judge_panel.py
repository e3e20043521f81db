"""The Judge section of the Evaluate tab: a judge model (any OpenAI-compatible
endpoint) compares two checkpoints' answers, grades them on a rubric, or is
checked against the Chat tab's votes (backend/judge/). The judge's prompt
and the rubric are shown and editable (the defaults of the mode, or the
run's tuned template); an empty box is the default. "Count calls" shows
what the cache leaves to ask before anything starts; "Judge" runs it as a
background job; the table lists the run's judgements, one row per
checkpoint for a graded one, from RUN/eval/judge/*.json.

Handlers are module-level functions over plain values, tested without a
browser; build() only places and wires.
"""

from __future__ import annotations

from functools import partial

import gradio as gr
from plotly.subplots import make_subplots

from backend.evaluation.judge_results import judge_dir, load_judgements
from backend.evaluation.results import step_of
from backend.judge import calibration, runner
from backend.judge.background import PROGRESS_FILE, judgement_progress_path, start_judgement
from backend.judge.client import JudgeEndpoint
from backend.judge.runner import Judgement
from backend.judge.templates import DEFAULT_KIND, GRADED_TEMPLATE, PAIRWISE_TEMPLATE, RUBRICS
from backend.messages import UserError
from backend.runs.jobs import FAILED, read_progress, stage_of
from ui.context import UIContext
from ui.i18n import localize
from ui.panels import evalset_panel
from ui.texts.judge_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)

POLL_EVERY_S = 3.0
MODES = ("pairwise", "graded", "calibration")
SOURCES = ("identity", "learning", "predictions")

# --- handlers (plain values in, component values out) -------------------------

def judgement(ctx: UIContext, run_id, url, model, key, mode, a, b, names, source, rubric_kind, limit,
              template="", rubric=""):
    """The Judgement the form describes; an empty template or rubric box is the default (checked later by
    runner.prepare_judgement, which turns a template without its blanks or a rubric without its scale into a sentence)."""
    chosen = [a, b] if mode == "pairwise" else str(names or "").split() if mode == "graded" else []
    return Judgement(ctx.workspace.runs_dir / run_id, JudgeEndpoint(str(url or "").strip(), str(model or "").strip(),
                                                                    str(key or "") or None),
                     mode, [str(n).strip() for n in chosen], source,
                     template=str(template or "").strip() or None,
                     rubric=(str(rubric or "").strip() or None) if mode == "graded" else None,
                     rubric_kind=rubric_kind, max_samples=int(limit or 0) or None, workspace=ctx.workspace)


def default_texts(ctx: UIContext, run_id, mode, rubric_kind) -> tuple[str, str]:
    """(the prompt template, the rubric) a judgement of `mode` uses when the boxes are left empty: the
    run's tuned pairwise template where calibration kept one, the default rubric of `rubric_kind`."""
    if mode == "graded":
        return GRADED_TEMPLATE, RUBRICS.get(rubric_kind, RUBRICS[DEFAULT_KIND])
    template = calibration.active_template(ctx.workspace.runs_dir / run_id) if run_id else PAIRWISE_TEMPLATE
    return template, ""


def count_calls(ctx: UIContext, lang, run_id, *values) -> str:
    """The calls the judgement would make, or the sentence why it cannot run."""

    if not run_id:
        return ctx.msg(lang, "jpanel.msg_pick_run")
    try:
        return ctx.msg(lang, "jpanel.msg_plan", **runner.plan(runner.prepare_judgement(judgement(ctx, run_id, *values))))
    except UserError as error:
        return ctx.msg(lang, "jpanel.msg_error", error=localize(error, lang))


def start(ctx: UIContext, lang, run_id, *values) -> str:
    if not run_id:
        return ctx.msg(lang, "jpanel.msg_pick_run")
    try:
        pid = start_judgement(judgement(ctx, run_id, *values))
    except UserError as error:
        return ctx.msg(lang, "jpanel.msg_error", error=localize(error, lang))
    ctx.remember(run_id=run_id)
    return ctx.msg(lang, "jpanel.msg_started", pid=pid)


def result_rows(run_dir) -> list[list]:
    """One row per judgement (per checkpoint for a graded one): name, checkpoint, score, spread, counts, judge."""
    rows = []
    for name, r in load_judgements(run_dir).items():
        judge = f"{r['judge']['model']} @ {r['judge']['url']}"
        if r["mode"] == "pairwise":
            low, high = r["interval"] or (None, None)
            rows.append([name, f"{r['a']} vs {r['b']}", _num(r["win_rate"]),
                         "-" if low is None else f"{low:.2f}-{high:.2f}",
                         f"W {r['wins']} L {r['losses']} T {r['ties']} inconsistent {r['inconsistent']} "
                         f"unparsed {r['unparsed_rows']}", judge])
        elif r["mode"] == "graded":
            rows += [[name, checkpoint, _num(g["mean"]), _num(g["std"]), f"n {g['n']} unparsed {g['unparsed']}", judge]
                     for checkpoint, g in r["checkpoints"].items()]
        else:
            rows.append([name, "votes", _num(r["agreement"]), _num(r["kappa"]), f"votes {r['votes']}", judge])
    return rows


def step_points(run_dir) -> dict[str, list[tuple[int, float, str]]]:
    """{series: [(step, value, checkpoint)]}: each graded judgement's mean grade per checkpoint, and each
    pairwise judgement's win rate at its A's step (the newest judgement of a name wins)."""
    series: dict[str, list[tuple[int, float, str]]] = {}
    for r in load_judgements(run_dir).values():
        if r["mode"] == "graded":
            points = [(step_of(run_dir, name), g["mean"], name) for name, g in r["checkpoints"].items()
                      if g["mean"] is not None]
            series[f"mean grade ({r['judge']['model']})"] = sorted(points)
        elif r["mode"] == "pairwise" and r["win_rate"] is not None:
            key = f"win rate over {r['b']} ({r['judge']['model']})"
            kept = [p for p in series.get(key, []) if p[2] != r["a"]]
            series[key] = sorted([*kept, (step_of(run_dir, r["a"]), r["win_rate"], r["a"])])
    return series


def chart(run_dir):
    """The judgements against the training step (None when there is nothing to draw)."""

    series = step_points(run_dir)
    if not series:
        return None
    figure = make_subplots(rows=1, cols=len(series), subplot_titles=list(series))
    for i, points in enumerate(series.values()):
        figure.add_scatter(x=[p[0] for p in points], y=[p[1] for p in points], text=[p[2] for p in points],
                           mode="lines+markers", hovertemplate="%{text}: %{y:.3g}<extra></extra>", showlegend=False,
                           row=1, col=i + 1)
    figure.update_xaxes(title_text="step")
    figure.update_layout(height=300, margin={"l": 30, "r": 10, "t": 40, "b": 30})
    return figure


def _num(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def poll(ctx: UIContext, lang, run_id, seen=""):
    """(the job's stage or error, the table of the run's judgements, their chart against the step, the
    signature of the result files drawn): the table and chart are redrawn only when the files changed."""
    import pandas as pd


    columns = [ctx.msg(lang, f"jpanel.col.{c}") for c in ("name", "checkpoint", "score", "spread", "counts", "judge")]
    if not run_id:
        return "", pd.DataFrame(columns=columns), None, ""
    run_dir = ctx.workspace.runs_dir / run_id
    progress = read_progress(judgement_progress_path(run_dir))
    stage = ""
    if progress.get("state") == FAILED:
        stage = ctx.msg(lang, "jpanel.failed", error=localize(stage_of(progress, "error"), lang))
    elif progress:
        stage = ctx.msg(lang, "jpanel.progress", stage=localize(stage_of(progress), lang))
    signature = f"{lang}:{run_id}:" + _signature(run_dir)
    if signature == seen:
        return stage, gr.skip(), gr.skip(), seen
    return stage, pd.DataFrame(result_rows(run_dir), columns=columns), chart(run_dir), signature


def _signature(run_dir) -> str:
    folder = judge_dir(run_dir)
    files = sorted(p for p in folder.glob("*.json") if p.name != PROGRESS_FILE) if folder.is_dir() else []
    return ";".join(f"{p.name}:{p.stat().st_mtime_ns}" for p in files)


# --- layout -------------------------------------------------------------------

def build(ctx: UIContext, run) -> None:
    """Below the Evaluate tab's results: uses its run dropdown."""

    private = {"api_visibility": "private"}
    with gr.Accordion(ctx.t("jpanel.title"), open=False, elem_id="judge"):
        with gr.Row(equal_height=True):
            url = gr.Textbox(label=ctx.t("jpanel.url"), placeholder="http://127.0.0.1:8000/v1", elem_id="judge-url")
            model = gr.Textbox(label=ctx.t("jpanel.model"), placeholder="base", elem_id="judge-model")
            key = gr.Textbox(label=ctx.t("jpanel.key"), type="password", elem_id="judge-key")
        mode = gr.Radio(label=ctx.t("jpanel.mode"), value="pairwise", elem_id="judge-mode",
                        choices=[(ctx.t(f"jpanel.mode.{m}"), m) for m in MODES])
        with gr.Row(equal_height=True):
            a = gr.Textbox(label=ctx.t("jpanel.a"), value="final", elem_id="judge-a")
            b = gr.Textbox(label=ctx.t("jpanel.b"), value="base", elem_id="judge-b")
            names = gr.Textbox(label=ctx.t("jpanel.graded_names"), elem_id="judge-names")
        with gr.Row(equal_height=True):
            source = gr.Dropdown(label=ctx.t("jpanel.source"), value="identity", elem_id="judge-source",
                                 choices=[(ctx.t(f"jpanel.source.{s}"), s) for s in SOURCES])
            rubric = gr.Dropdown(label=ctx.t("jpanel.rubric_kind"), choices=list(RUBRICS), value=DEFAULT_KIND,
                                 elem_id="judge-rubric")
            limit = gr.Number(label=ctx.t("jpanel.limit"), value=0, minimum=0, precision=0, elem_id="judge-limit")
        with gr.Accordion(ctx.t("jpanel.prompts"), open=False, elem_id="judge-prompts"):
            template = gr.Textbox(label=ctx.t("jpanel.template"), value=PAIRWISE_TEMPLATE, lines=8,
                                  elem_id="judge-template")
            rubric_text = gr.Textbox(label=ctx.t("jpanel.rubric_text"), lines=5, elem_id="judge-rubric-text")
            reset = gr.Button(ctx.t("jpanel.reset"), size="sm", elem_id="judge-reset")
        with gr.Row():
            plan = gr.Button(ctx.t("jpanel.plan"), elem_id="judge-plan")
            go = gr.Button(ctx.t("jpanel.start"), variant="primary", elem_id="judge-start")
        status = gr.Markdown(elem_id="judge-status")
        progress = gr.Markdown(elem_id="judge-progress")
        gr.Markdown(ctx.t("jpanel.about"), elem_id="judge-about")
        table = gr.Dataframe(label=ctx.t("jpanel.table"), interactive=False, wrap=True, elem_id="judge-table")
        plot = gr.Plot(label=ctx.t("jpanel.chart"), elem_id="judge-chart")
        evalset_panel.build(ctx, url, model, key)
    inputs = [ctx.lang, run, url, model, key, mode, a, b, names, source, rubric, limit, template, rubric_text]
    defaults = partial(default_texts, ctx)
    for trigger in (mode.change, rubric.change, reset.click, run.change):
        trigger(defaults, [run, mode, rubric], [template, rubric_text], **private)
    plan.click(partial(count_calls, ctx), inputs, status, **private)
    go.click(partial(start, ctx), inputs, status, **private)
    seen = gr.State("")
    ctx.timers.poll(POLL_EVERY_S, partial(poll, ctx), [ctx.lang, run, seen], [progress, table, plot, seen])
