"""Runs tab: every run of the workspace, and a live monitor of the selected one.

The monitor is a gr.Timer tick that reads only the lines appended to
metrics.jsonl since the last tick (one MetricsTail per browser session and
run, kept in gr.State) and redraws the plotly charts from the records it
holds. Everything comes from the run folder, so a page refresh or an app
restart shows a running run again with its whole history.
"""

from __future__ import annotations

import dataclasses

import gradio as gr

from backend.runs.files import LOG_FILE, MetricsTail, tail_text
from backend.runs.store import RunError
from backend.training.estimate import planned_steps
from ui.context import UIContext
from ui.forms import _label as _
from ui.i18n import localize
from ui.panels import diagnostics_panel, grpo_panel, learning_panel, queue_panel, sweep_results_panel
from ui.panels.kept_panel import RUNS_TEXT as KEPT_TEXT
from ui.panels.kept_panel import build_runs as build_kept
from ui.run_actions import resume, stop
from ui.run_choice import chosen_run, run_dropdown
from ui.views import charts, run_view

TICK_S = 2.0
TABLE_TICK_S = 5.0
LOG_BYTES = 8000
CHART_KEYS = ("loss", "lr", "grad_norm", "tokens", "memory", "layers", "rewards", "accuracy")

TEXT: dict[str, dict[str, str]] = {
    **grpo_panel.TEXT,
    **diagnostics_panel.TEXT,
    **queue_panel.TEXT,
    **sweep_results_panel.TEXT,
    "runs.table": _("Runs", "运行列表"),
    **KEPT_TEXT,  # drops against the run this one continues (ui/panels/kept_panel.py)
    **learning_panel.RUNS_TEXT,
    "runs.refresh": _("Refresh", "刷新"),
    "runs.select": _("Watch run", "查看运行"),
    "runs.stop": _("Stop", "停止"),
    "runs.resume": _("Resume", "继续"),
    "runs.none": _("No run selected. Start one in the Train tab, or pick one above.",
                   "未选择运行。请在“训练”页开始一个，或在上方选择。"),
    "runs.train_view": _("Run <b>{run}</b> (watched in the Runs tab)", "运行 <b>{run}</b>（在“运行”页查看）"),
    "runs.progress": _("step {step} / {max_steps} · elapsed {elapsed} · ETA {eta}",
                       "第 {step} / {max_steps} 步 · 已用 {elapsed} · 预计剩余 {eta}"),
    "runs.stage.demo_model": _("building the demo model (first use in this workspace, once): pre-training step "
                               "{done} / {total} · elapsed {elapsed}",
                               "正在构建演示模型（此工作区首次使用，仅一次）：预训练第 {done} / {total} 步 · 已用 {elapsed}"),
    "runs.stage.convert_model": _("converting the model into a Hugging Face folder (first use in this workspace, "
                                  "once): step {done} / {total} · elapsed {elapsed}",
                                  "正在把模型转换为 Hugging Face 文件夹（此工作区首次使用，仅一次）：第 {done} / {total} 步 · 已用 {elapsed}"),
    "runs.stage.replay": _("the base model answers general prompts for replay (once per model, cached): prompt "
                           "{done} / {total} · elapsed {elapsed}",
                           "基础模型正在回答用于回放的通用提示（每个模型一次，已缓存）：第 {done} / {total} 个提示 · 已用 {elapsed}"),
    "runs.stage.replay_wait_app": _(
        "waiting for the default model's background preparation, which answers the same replay prompts: "
        "{done} of {total} base answers · elapsed {elapsed}",
        "正在等待默认模型的后台准备（它在回答同一批回放提示）：已有 {done} / {total} 条基础回答 · 已用 {elapsed}"),
    "runs.stage.replay_wait": _("waiting for run {holder}, which answers the same replay prompts: {done} of {total} "
                                "base answers · elapsed {elapsed}",
                                "正在等待运行 {holder}（它在回答同一批回放提示）：已有 {done} / {total} 条基础回答 · 已用 {elapsed}"),
    "runs.stage.learning": _("learning report: {checkpoint} answers held-out and general prompts: {done} / {total} "
                             "· elapsed {elapsed}",
                             "学习报告：{checkpoint} 正在回答留出的提示和通用问题：{done} / {total} · 已用 {elapsed}"),
    "runs.stage.learned_check": _("learned stop: the model answers its own training rows: {done} / {total} "
                                  "· elapsed {elapsed}",
                                  "学会即停：模型正在回答自己的训练数据：{done} / {total} · 已用 {elapsed}"),
    "runs.alert.failed": _("❌ **This run failed:** {error}", "❌ **运行失败**：{error}"),
    "runs.alert.no_error": _("the worker recorded no error; see the log below.", "训练进程未记录错误，请查看下方日志。"),
    "runs.alert.lost": _("⚠️ **This run was lost.** {error} Press Resume to continue it.",
                         "⚠️ **运行已丢失**。{error} 点击“继续”以接着训练。"),
    "runs.log": _("train.log (last lines)", "train.log（末尾）"),
    "runs.chart.loss": _("Loss (train raw and smoothed, eval)", "损失（训练原始/平滑，验证）"),
    "runs.chart.lr": _("Learning rate", "学习率"),
    "runs.chart.grad_norm": _("Gradient norm", "梯度范数"),
    "runs.chart.tokens": _("Tokens per second", "每秒 token 数"),
    "runs.chart.memory": _("Memory (GiB)", "内存（GiB）"),
    "runs.chart.layers": _("Gradient norm per layer (attention / MLP)", "逐层梯度范数（注意力 / MLP）"),
    "runs.chart.empty": _("Waiting for the first logged step…", "等待第一个记录的步骤…"),
    "runs.chart.rewards": _("Preference rewards: chosen, rejected, margin", "偏好奖励：chosen、rejected、差值"),
    "runs.chart.accuracy": _("Preference accuracy (share of pairs ranked right)", "偏好准确率（排序正确的样本对比例）"),
    "runs.compare": _("Compare runs", "对比运行"),
    "runs.compare.pick": _("Runs to compare (two or more)", "要对比的运行（两个或更多）"),
    "runs.compare.go": _("Compare", "对比"),
    "runs.compare.need_two": _("Pick at least two runs to compare.", "请至少选择两个运行。"),
    "runs.compare.same": _("These runs have the same settings.", "这些运行的设置相同。"),
    "runs.msg.error": _("❌ {error}", "❌ {error}"),
    # Column headers of the runs table (run_view.TABLE_COLUMNS) and the compare table.
    "runs.col.run": _("run", "运行"),
    "runs.col.state": _("state", "状态"),
    "runs.col.model": _("model", "模型"),
    "runs.col.method": _("method", "方法"),
    "runs.col.progress": _("progress", "进度"),
    "runs.col.best_eval_loss": _("best eval loss", "最佳验证损失"),
    "runs.col.started": _("started", "开始时间"),
    "runs.col.duration": _("duration", "用时"),
    "runs.col.setting": _("setting", "设置"),
    "runs.col.preference_accuracy": _("preference accuracy", "偏好准确率"),
    # Legend and axis words of the charts (ui/views/charts.py WORDS).
    "runs.word.step": _("step", "步数"),
    "runs.word.loss": _("loss", "损失"),
    "runs.word.train_loss": _("train loss", "训练损失"),
    "runs.word.train_loss_smoothed": _("train loss (smoothed)", "训练损失（平滑）"),
    "runs.word.eval_loss": _("eval loss", "验证损失"),
    "runs.word.minutes": _("minutes", "分钟"),
    "runs.word.norm": _("norm", "范数"),
    "runs.word.train": _("train", "训练"),
    "runs.word.eval": _("eval", "验证"),
    "runs.word.learning_rate": _("learning rate", "学习率"),
    "runs.word.grad_norm": _("gradient norm", "梯度范数"),
    "runs.word.tokens_per_second": _("tokens / s", "token / 秒"),
    "runs.word.allocated": _("allocated", "已分配"),
    "runs.word.reserved": _("reserved", "已预留"),
    "runs.word.rss": _("rss", "进程内存"),
    "runs.word.attn": _("attn", "注意力"),
    "runs.word.mlp": _("mlp", "MLP"),
    "runs.word.rewards/chosen": _("rewards/chosen", "chosen 奖励"),
    "runs.word.rewards/rejected": _("rewards/rejected", "rejected 奖励"),
    "runs.word.rewards/margins": _("rewards/margins", "奖励差值"),
    "runs.word.rewards/accuracies": _("rewards/accuracies", "偏好准确率"),
    # The run states (status.json `state`) as the runs table shows them.
    **{f"runs.state.{state}": _(state, zh) for state, zh in (
        ("queued", "排队中"), ("running", "运行中"), ("completed", "已完成"), ("stopped", "已停止"),
        ("failed", "失败"), ("lost", "已丢失"))},
}
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
    info = _with_planned_total(ctx, watch, info)
    new = watch.read_new()
    charts = figures(ctx, lang, watch.records) if (new or switched) else [gr.skip()] * len(CHART_KEYS)
    charts[-2:] = _preference_plots(info, charts[-2:])
    return [watch, run_view.alert_text(msg, info, lang), run_view.progress_html(msg, info, watch.records),
            gr.update(visible=run_view.can_resume(info)), tail_text(info.run_dir / LOG_FILE, LOG_BYTES), *charts]


def _with_planned_total(ctx: UIContext, watch: run_view.Watch, info):
    """A run before its worker knows its step total (loading, replay answers, the queue) shows the
    Plan's, counted once a watch, instead of "step 0 / ?"."""
    if info.max_steps or info.state not in ("queued", "running") or info.config is None:
        return info
    if watch.planned_steps is None:
        try:
            watch.planned_steps = planned_steps(info.config, ctx.workspace)
        except Exception:  # noqa: BLE001 - a dataset that cannot be read: the worker's own total comes later
            watch.planned_steps = 0
    return dataclasses.replace(info, max_steps=watch.planned_steps) if watch.planned_steps else info


def train_view(ctx: UIContext, lang: str | None, monitor: list) -> str:
    """The Train tab's view of the watched run (after Start: the run just started), from one monitor
    tick's values: its bar, with the Plan's step total, and a small line of its train loss."""
    watch = monitor[0]
    if not watch.run_id:
        return ""
    title = _msg(ctx, lang)("runs.train_view", run=watch.run_id)
    return f'<div id="train-progress-run">{title}</div>{monitor[2]}{run_view.loss_sparkline(watch.records)}'


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
    gr.Timer(TABLE_TICK_S).tick(do_tick, [lang, c["select"], known], list_outputs, show_progress="hidden", **private)
    if shared_run is not None:
        c["select"].change(lambda r: r, c["select"], shared_run, **private)
        # A run started in Train shows up here selected.
        shared_run.change(do_list, [lang, shared_run, known], list_outputs, **private)

        def remember(run_id):
            ctx.remember(run_id=run_id)  # the next launch opens on this run

        shared_run.change(remember, shared_run, None, **private)

    monitor_outputs = [c["watch"], c["alert"], c["progress"], c["resume"], c["log"], *plots]
    train_progress = ctx.shared.get("train_progress")  # the Train tab's view (ui/tabs/train.py), if built

    def do_monitor(lang, watching, run_id):
        monitor = tick(ctx, lang, watching, run_id)
        return [*monitor, train_view(ctx, lang, monitor)] if train_progress is not None else monitor

    timer = gr.Timer(TICK_S)  # the one timer of a watched run: the Train tab's view rides on it
    for trigger in (timer.tick, c["select"].change):
        trigger(do_monitor, [lang, c["watch"], c["select"]],
                monitor_outputs + ([train_progress] if train_progress is not None else []),
                show_progress="hidden", trigger_mode="always_last", **private)
    c["stop"].click(lambda lang, r: stop(ctx, lang, r), [lang, c["select"]], c["message"], **private)
    c["resume"].click(lambda lang, r: resume(ctx, lang, r), [lang, c["select"]], c["message"], **private)
    c["go"].click(lambda lang, ids: compare(ctx, lang, ids), [lang, c["pick"]],
                  [c["compare_note"], c["compare_plot"], c["compare_table"]], **private)
