"""Runs tab: every run of the workspace, and a live monitor of the selected one.

The monitor is a gr.Timer tick that reads only the lines appended to
metrics.jsonl since the last tick (one MetricsTail per browser session and
run, kept in gr.State) and redraws the plotly charts from the records it
holds. Everything comes from the run folder, so a page refresh or an app
restart shows a running run again with its whole history.
"""

from __future__ import annotations

import gradio as gr

from backend.runs.files import LOG_FILE, MetricsTail, tail_text
from backend.runs.store import RunError
from ui.context import UIContext
from ui.i18n import localize
from ui.panels import diagnostics_panel, grpo_panel, learning_panel, queue_panel, sweep_results_panel
from ui.panels.kept_panel import build_runs as build_kept
from ui.run_actions import resume, stop
from ui.run_choice import chosen_run, run_dropdown
from ui.texts.runs_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)
from ui.views import charts, run_view

TICK_S = 2.0
TABLE_TICK_S = 5.0
LOG_BYTES = 8000
CHART_KEYS = ("loss", "lr", "grad_norm", "tokens", "memory", "layers", "rewards", "accuracy")

WORD_KEYS = ("step", "loss", "train_loss", "train_loss_smoothed", "eval_loss", "minutes", "norm", "train", "eval",
             "learning_rate", "grad_norm", "tokens_per_second", "allocated", "reserved", "rss", "attn", "mlp",
             "rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies")
# The stages whose Trainer logs TRL's preference rewards; the other runs show no reward charts.
PREFERENCE_STAGES = ("dpo", "orpo", "simpo", "kto")


def chart_words(msg) -> dict[str, str]:
    return {k: msg(f"runs.word.{k}") for k in WORD_KEYS}


def table_value(msg, rows: list[list]) -> dict:
    """The runs table with its headers in the user's language."""
    return {"headers": [msg(f"runs.col.{c}") for c in run_view.TABLE_COLUMNS], "data": rows}


def _msg(ctx: UIContext, lang: str | None):
    return lambda key, **values: ctx.msg(lang, key, **values)


# --- handlers ---------------------------------------------------------------

def list_runs(ctx: UIContext, selected: str | None = None, known: list[str] | None = None,
              lang: str | None = "en") -> tuple[list[list], list[str], str | None]:
    """(table rows, run ids, run to watch): a run started since the page listed `known` (so a Start
    after a Stop is watched, not the stopped run), else `selected` when it still exists, else the
    newest live run, else the newest run."""
    infos = ctx.store.list()
    ids = [i.run_id for i in infos]
    live = [i.run_id for i in infos if i.state in ("queued", "running")]
    return run_view.table_rows(infos, _msg(ctx, lang)), ids, chosen_run(ids, selected, live, known)


def figures(ctx: UIContext, lang: str | None, records: list[dict]) -> list:
    msg = _msg(ctx, lang)
    empty, words = msg("runs.chart.empty"), chart_words(msg)
    title = {k: msg(f"runs.chart.{k}") for k in CHART_KEYS}
    return [
        charts.loss_figure(records, title["loss"], empty, words=words),
        charts.line_figure(records, "learning_rate", title["lr"], empty, words=words),
        charts.line_figure(records, "grad_norm", title["grad_norm"], empty, words=words),
        charts.line_figure(records, "tokens_per_second", title["tokens"], empty, words=words),
        charts.memory_figure(records, title["memory"], empty, words=words),
        charts.grad_heatmap(records, title["layers"], empty, words=words),
        charts.preference_figure(records, charts.PREFERENCE_REWARDS, title["rewards"], empty, words=words),
        charts.preference_figure(records, ("rewards/accuracies",), title["accuracy"], empty, words=words),
    ]


def _preference_plots(info, figures: list) -> list:
    """The two preference charts when they were rebuilt: hidden for a run whose stage logs no preference
    rewards (sft, grpo) rather than drawn empty."""
    if any(f == gr.skip() for f in figures):
        return figures
    if info.training_stage not in PREFERENCE_STAGES:
        return [gr.update(visible=False)] * len(figures)
    return [gr.update(value=f, visible=True) for f in figures]


def tick(ctx: UIContext, lang: str | None, watch: run_view.Watch | None, run_id: str | None) -> list:
    """One monitor update: [watch, alert, progress, resume visible, log, *figures].
    Figures are only rebuilt when new records arrived (else gr.skip())."""
    msg = _msg(ctx, lang)
    watch = watch if isinstance(watch, run_view.Watch) else run_view.Watch()
    if not run_id:
        watch.follow(None, None)
        return [watch, msg("runs.none"), "", gr.update(visible=False), "", *[gr.skip()] * len(CHART_KEYS)]
    try:
        info = ctx.store.get(run_id)
    except RunError as error:
        return [watch, msg("runs.msg.error", error=localize(error, lang)), "", gr.update(visible=False), "",
                *[gr.skip()] * len(CHART_KEYS)]
    switched = watch.follow(run_id, info.run_dir)
    new = watch.read_new()
    charts = figures(ctx, lang, watch.records) if (new or switched) else [gr.skip()] * len(CHART_KEYS)
    charts[-2:] = _preference_plots(info, charts[-2:])
    return [watch, run_view.alert_text(msg, info, lang), run_view.progress_html(msg, info, watch.records),
            gr.update(visible=run_view.can_resume(info)), tail_text(info.run_dir / LOG_FILE, LOG_BYTES), *charts]


def compare(ctx: UIContext, lang: str | None, run_ids: list[str] | None) -> tuple:
    """(message, figure, config-difference table) for two or more runs."""
    msg = _msg(ctx, lang)
    if not run_ids or len(run_ids) < 2:
        return msg("runs.compare.need_two"), None, None
    try:
        infos = [ctx.store.get(r) for r in run_ids]
    except RunError as error:
        return msg("runs.msg.error", error=localize(error, lang)), None, None
    # One full read per run, once per click: compare is not on the timer.
    records = {i.run_id: MetricsTail(i.run_dir).read_new() for i in infos}
    headers, rows = run_view.config_diff(infos)
    headers[0] = msg("runs.col.setting")
    note = "" if rows else msg("runs.compare.same")
    table = {"headers": headers, "data": rows or [["", *[""] * len(infos)]]}
    figure = charts.compare_figure(records, msg("runs.compare"), msg("runs.chart.empty"), words=chart_words(msg))
    return note, figure, table


# --- layout -----------------------------------------------------------------

def build(ctx: UIContext) -> None:
    c: dict = {}
    with gr.Row(equal_height=True):
        c["select"] = gr.Dropdown([], label=ctx.t("runs.select"), allow_custom_value=False, scale=3,
                                  elem_id="runs-select")
        c["refresh"] = gr.Button(ctx.t("runs.refresh"), scale=0, elem_id="runs-refresh")
        c["stop"] = gr.Button(ctx.t("runs.stop"), variant="stop", scale=0, elem_id="runs-stop")
        c["resume"] = gr.Button(ctx.t("runs.resume"), visible=False, scale=0, elem_id="runs-resume")
    c["table"] = gr.Dataframe(headers=list(run_view.TABLE_COLUMNS), interactive=False, label=ctx.t("runs.table"),
                              elem_id="runs-table", max_height=260)
    queue_panel.build(ctx)  # the runs waiting for their devices, with Cancel / Up / Down / Start now
    c["alert"] = gr.Markdown(elem_id="runs-alert")
    build_kept(ctx, c["select"])  # worse than the run it continues: which metric, by how much
    c["message"] = gr.Markdown(elem_id="runs-message")
    c["progress"] = gr.HTML(elem_id="runs-progress")
    plots = []
    for row in (("loss", "lr"), ("grad_norm", "tokens"), ("memory", "layers"), ("rewards", "accuracy")):
        with gr.Row():
            plots += [gr.Plot(label=ctx.t(f"runs.chart.{k}"), elem_id=f"runs-chart-{k.replace('_', '-')}")
                      for k in row]
    learning_panel.build_runs(ctx, c["select"])  # learned / kept / ended against the step
    grpo_panel.build(ctx, c["select"])  # shown for a GRPO run only
    c["log"] = gr.Textbox(label=ctx.t("runs.log"), lines=12, max_lines=12, autoscroll=True, interactive=False,
                          elem_id="runs-log")
    with gr.Accordion(ctx.t("runs.compare"), open=False):
        with gr.Row(equal_height=True):
            c["pick"] = gr.Dropdown([], multiselect=True, label=ctx.t("runs.compare.pick"), scale=3,
                                    elem_id="runs-compare-pick")
            c["go"] = gr.Button(ctx.t("runs.compare.go"), scale=0, elem_id="runs-compare-go")
        c["compare_note"] = gr.Markdown()
        c["compare_plot"] = gr.Plot(elem_id="runs-compare-chart")
        c["compare_table"] = gr.Dataframe(interactive=False, elem_id="runs-compare-table")
        sweep_results_panel.build(ctx)  # a sweep's runs by its target, the best opened in Chat / Evaluate / Export
    diagnostics_panel.build(ctx, c["select"])  # the run's diagnostics zip, secrets removed, for a bug report
    c["watch"] = gr.State(None)  # a run_view.Watch per session
    _wire(ctx, c, plots)


def _wire(ctx: UIContext, c: dict, plots: list) -> None:
    private = {"api_visibility": "private"}
    lang, shared_run = ctx.lang, ctx.shared.get("run_id")

    def do_list(lang, selected, known=None):
        rows, ids, chosen = list_runs(ctx, selected, known=known, lang=lang)
        return table_value(_msg(ctx, lang), rows), run_dropdown(ids, chosen)[0], gr.update(choices=ids), ids

    def do_tick(lang, selected, known):
        table, select, pick, ids = do_list(lang, selected, known)
        # The same run: the choices alone, so a tick sent before the user picked another run
        # never puts back the one it was sent with.
        return table, gr.update(choices=ids) if select["value"] == selected else select, pick, ids

    known = gr.State(None)  # the run ids this page listed last (list_runs)
    list_outputs = [c["table"], c["select"], c["pick"], known]
    select_source = shared_run if shared_run is not None else c["select"]
    page = gr.context.Context.root_block
    page.load(do_list, [lang, select_source], list_outputs, **private)
    c["refresh"].click(do_list, [lang, c["select"], known], list_outputs, **private)
    lang.change(do_list, [lang, c["select"], known], list_outputs, **private)

    def pick_row(evt: gr.SelectData):
        row = evt.row_value or []
        return row[0] if row else gr.update()  # the run id column

    c["table"].select(pick_row, None, c["select"], **private)
    ctx.timers.poll(TABLE_TICK_S, do_tick, [lang, c["select"], known], list_outputs)
    if shared_run is not None:
        c["select"].change(lambda r: r, c["select"], shared_run, **private)
        # A run started in Train shows up here selected.
        shared_run.change(do_list, [lang, shared_run, known], list_outputs, **private)

        def remember(run_id):
            ctx.remember(run_id=run_id)  # the next launch opens on this run

        shared_run.change(remember, shared_run, None, **private)

    monitor_outputs = [c["watch"], c["alert"], c["progress"], c["resume"], c["log"], *plots]
    monitor = {"fn": lambda lang, w, r: tick(ctx, lang, w, r), "inputs": [lang, c["watch"], c["select"]],
               "outputs": monitor_outputs}
    c["select"].change(**monitor, show_progress="hidden", trigger_mode="always_last", **private)
    ctx.timers.poll(TICK_S, **monitor)
    c["stop"].click(lambda lang, r: stop(ctx, lang, r), [lang, c["select"]], c["message"], **private)
    c["resume"].click(lambda lang, r: resume(ctx, lang, r), [lang, c["select"]], c["message"], **private)
    c["go"].click(lambda lang, ids: compare(ctx, lang, ids), [lang, c["pick"]],
                  [c["compare_note"], c["compare_plot"], c["compare_table"]], **private)
