"""The learning report (RUN/eval/learning.json, backend/learning/) in
three tabs: the Runs tab's chart of learned / kept / ended against the step,
the Chat tab's Report (each held-out prompt with the base's and a
checkpoint's answers, right or wrong) and the Evaluate tab's table with a
button that scores every checkpoint (`python -m backend.evaluate --learning`).

Each view has its own timer and redraws only when learning.json changed.
Handlers are plain functions over plain values (tests/test_learning_panel.py).
"""

from __future__ import annotations

from functools import partial

import gradio as gr

from backend.learning.entries import answers_beside_base, load_report, report_path, summary_rows
from backend.learning.table import source_lines, warnings
from backend.messages import UserError, msg
from backend.runs.jobs import RUNNING, launch_job, read_progress, stage_of
from ui.context import UIContext
from ui.i18n import localize
from ui.run_choice import run_folder
from ui.texts.learning_panel_texts import CHAT_TEXT, EVALUATE_TEXT, RUNS_TEXT, TABLE_TEXT  # noqa: F401  (read here by the shell and the tabs)
from ui.views import charts

TICK_S = 3.0
LEARNING_LOG = "learning.log"
LEARNING_PROGRESS = "learning_progress.json"


# --- handlers -------------------------------------------------------------------

def _report(ctx: UIContext, run_id):
    run_dir = run_folder(ctx.workspace, run_id)
    if run_dir is None:
        return None, None, 0
    path = report_path(run_dir)
    stamp = path.stat().st_mtime_ns if path.is_file() else 0
    return run_dir, load_report(run_dir), stamp


def about_lines(ctx: UIContext, lang, report: dict) -> list[str]:
    """What the numbers were measured on, and the checkpoints not scored with why."""

    lines = [f"⚠️ {localize(line, lang)}" for line in warnings(report)]
    lines += [localize(line, lang) for line in source_lines(report)]
    lines.append(ctx.msg(lang, "evaluate.learning.kept_about"))
    lines += [ctx.msg(lang, "evaluate.learning.skipped", checkpoint=s["checkpoint"], step=s["step"], reason=s["reason"])
              for s in report.get("skipped", [])]
    return lines


def figure(ctx: UIContext, lang, report: dict | None):
    words = {k: ctx.msg(lang, f"runs.learning.{k}") for k in ("learned", "kept", "ended")}
    words["step"] = ctx.msg(lang, "runs.word.step")
    return charts.learning_figure(summary_rows(report) if report else [], ctx.msg(lang, "runs.learning.chart"),
                                  ctx.msg(lang, "runs.learning.empty"), words=words)


def runs_poll(ctx: UIContext, lang, run_id, signature):
    """(about markdown, chart, signature) of the watched run: redrawn when learning.json changed."""
    run_dir, report, stamp = _report(ctx, run_id)
    new_signature = f"{run_id}|{lang}|{stamp}"
    if new_signature == signature:
        return gr.skip(), gr.skip(), signature
    about = "\n\n".join(about_lines(ctx, lang, report)) if report else ""
    return about, figure(ctx, lang, report), new_signature


def _percent(share, n) -> str:
    return "–" if share is None else f"{share:.0%} ({round(share * n)}/{n})"


def summary_frame(ctx: UIContext, lang, report: dict):
    import pandas as pd

    columns = [ctx.msg(lang, f"evaluate.learning.col.{k}") for k in ("checkpoint", "step", "learned", "kept", "ended",
                                                              "rouge_l")]
    rows = []
    for entry, row in zip(report.get("checkpoints", []), summary_rows(report)):
        kept = (_percent(row["kept"], row["kept_n"]) if row["kept"] is not None
                else "–" if "of" not in entry["kept"]  # a checkpoint when the base answered too few to ask
                else ctx.msg(lang, "evaluate.learning.kept_base", n=entry["kept"]["n"], of=entry["kept"]["of"]))
        rows.append([row["checkpoint"], row["step"], _percent(row["learned"], row["learned_n"]), kept,
                     _percent(row["ended"], row["ended_n"]),
                     "–" if row["rouge_l"] is None else f"{row['rouge_l']:.3f}"])
    return pd.DataFrame(rows, columns=columns)


def evaluate_view(ctx: UIContext, lang, run_id, signature):
    """(note, table, signature) for the Evaluate tab: the report, the job's progress while it runs."""

    run_dir, report, stamp = _report(ctx, run_id)
    progress = read_progress(run_dir / "eval" / LEARNING_PROGRESS) if run_dir else {}
    new_signature = f"{run_id}|{lang}|{stamp}|{progress.get('updated_at')}"
    if new_signature == signature:
        return gr.skip(), gr.skip(), signature
    lines = []
    if progress.get("state") == RUNNING:
        lines.append(ctx.msg(lang, "evaluate.learning.progress", stage=localize(stage_of(progress), lang),
                             done=progress.get("done") or 0, total=progress.get("total") or "?"))
    elif progress.get("error"):
        lines.append(ctx.msg(lang, "evaluate.learning.failed", error=localize(stage_of(progress, "error"), lang)))
    if report is None:
        if run_dir is not None:
            lines.append(localize(msg("learning.none", run=run_dir.name), lang))
        return "\n\n".join(lines), gr.update(visible=False), new_signature
    lines += about_lines(ctx, lang, report)
    return "\n\n".join(lines), gr.update(value=summary_frame(ctx, lang, report), visible=True), new_signature


def start_learning(ctx: UIContext, lang, run_id) -> str:
    """Launch `python -m backend.evaluate --run R --learning` detached."""

    run_dir = run_folder(ctx.workspace, run_id)
    if run_dir is None:
        return ctx.msg(lang, "evaluate.learning.no_run")
    progress = run_dir / "eval" / LEARNING_PROGRESS
    if read_progress(progress).get("state") == RUNNING:
        return localize(UserError(msg("evaluate.running", run=run_dir.name)), lang)
    progress.unlink(missing_ok=True)
    pid = launch_job("backend.evaluate", ["--run", str(run_dir), "--learning"], run_dir / "eval" / LEARNING_LOG,
                 progress)
    return ctx.msg(lang, "evaluate.learning.started", pid=pid)


def report_checkpoints(ctx: UIContext, runs) -> tuple:
    """The checkpoints of the first chosen run's report (the base is the other column)."""
    run_id = (runs or [None])[0] if isinstance(runs, list) else runs
    _, report, _ = _report(ctx, run_id)
    names = [e["checkpoint"] for e in (report or {}).get("checkpoints", []) if e["checkpoint"] != "base"]
    return gr.update(choices=names, value=names[-1] if names else None)


def report_rows(ctx: UIContext, lang, runs, checkpoint, only_changed: bool):
    """(note, table): each prompt with the base's and `checkpoint`'s answers, ✅ / ❌."""
    import pandas as pd

    run_id = (runs or [None])[0] if isinstance(runs, list) else runs
    run_dir, report, _ = _report(ctx, run_id)
    if report is None:
        note = localize(msg("learning.none", run=run_dir.name), lang) if run_dir else ctx.msg(lang, "chat.report.no_run")
        return note, gr.update(visible=False)
    rows = answers_beside_base(report, checkpoint) if checkpoint else []
    if only_changed:
        rows = [r for r in rows if r["base_right"] != r["right"]]

    def mark(answer, right) -> str:
        return "" if answer is None else f"{'✅' if right else '❌'} {answer}"

    columns = [ctx.msg(lang, f"chat.report.{k}") for k in ("kind", "prompt", "reference", "base")] + [checkpoint or ""]
    frame = pd.DataFrame([[ctx.msg(lang, f"chat.report.kind.{r['kind']}"), r["prompt"], r["reference"],
                           mark(r["base"], r["base_right"]), mark(r["answer"], r["right"])] for r in rows],
                         columns=columns)
    return "\n\n".join(about_lines(ctx, lang, report)), gr.update(value=frame, visible=True)


# --- layout -----------------------------------------------------------------------

def build_runs(ctx: UIContext, select) -> None:
    """The chart of the watched run, with what it was measured on."""
    private = {"api_visibility": "private"}
    with gr.Row():
        chart = gr.Plot(label=ctx.t("runs.learning.chart"), elem_id="runs-chart-learning")
        about = gr.Markdown(elem_id="runs-learning-about")
    seen = gr.State("")
    poll = partial(runs_poll, ctx)
    select.change(poll, [ctx.lang, select, seen], [about, chart, seen], show_progress="hidden", **private)
    ctx.timers.poll(TICK_S, poll, [ctx.lang, select, seen], [about, chart, seen])


def build_evaluate(ctx: UIContext, run) -> None:
    private = {"api_visibility": "private"}
    with gr.Accordion(ctx.t("evaluate.learning.title"), open=True):
        start = gr.Button(ctx.t("evaluate.learning.start"), elem_id="evaluate-learning-start")
        status = gr.Markdown(elem_id="evaluate-learning-status")
        note = gr.Markdown(elem_id="evaluate-learning-note")
        table = gr.Dataframe(interactive=False, visible=False, elem_id="evaluate-learning-table")
    seen = gr.State("")
    view = partial(evaluate_view, ctx)
    run.change(view, [ctx.lang, run, seen], [note, table, seen], show_progress="hidden", **private)
    ctx.timers.poll(TICK_S, view, [ctx.lang, run, seen], [note, table, seen])
    start.click(partial(start_learning, ctx), [ctx.lang, run], status, **private)


def build_chat(ctx: UIContext, runs) -> None:
    private = {"api_visibility": "private"}
    with gr.Accordion(ctx.t("chat.report.title"), open=False, elem_id="chat-report"):
        with gr.Row(equal_height=True):
            checkpoint = gr.Dropdown(label=ctx.t("chat.report.checkpoint"), choices=[], scale=2,
                                     elem_id="chat-report-checkpoint")
            only_changed = gr.Checkbox(label=ctx.t("chat.report.only_changed"), value=False, scale=3,
                                       elem_id="chat-report-changed")
        note = gr.Markdown(elem_id="chat-report-note")
        table = gr.Dataframe(interactive=False, wrap=True, visible=False, elem_id="chat-report-table")
    show = {"fn": partial(report_rows, ctx), "inputs": [ctx.lang, runs, checkpoint, only_changed],
            "outputs": [note, table], **private}
    runs.change(partial(report_checkpoints, ctx), runs, checkpoint, **private).then(**show)
    checkpoint.change(**show)
    only_changed.change(**show)
