"""The Runs tab's sweep table: pick a sweep, see one row per run (swept values, target, time,
tokens/s, peak memory) and the target against each swept setting, with the best run marked and
opened in Chat, Evaluate or Export in one click (the shared run, then that tab).

The rows are backend/sweeps/sweep_table.py's; this module only renders and wires them.
"""

from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from backend.sweeps.queueing import list_sweeps
from backend.sweeps.sweep_table import SweepTable, sweep_table
from ui.context import UIContext
from ui.texts.sweep_results_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)

OPEN_TABS = ("chat", "evaluate", "export")


def sweep_choices(ctx: UIContext) -> list[tuple[str, str]]:
    return [(f"{r['sweep_id']} · {', '.join(r.get('fields') or [])} · {len(r.get('runs') or [])} runs", r["sweep_id"])
            for r in list_sweeps(ctx.workspace)]


def table_rows(msg, table: SweepTable) -> dict:
    headers = [msg("runs.sweep.col.best"), msg("runs.sweep.col.run"), *table.fields, table.target,
               msg("runs.sweep.col.state"), msg("runs.sweep.col.time"), msg("runs.sweep.col.tokens"),
               msg("runs.sweep.col.memory")]
    data = [["★" if r.best else "", r.run_id, *[r.values.get(f) for f in table.fields], _rounded(r.target), r.state,
             _rounded(r.wall_s), _rounded(r.tokens_per_second), _rounded(r.peak_memory_gb)] for r in table.rows]
    return {"headers": headers, "data": data or [[""] * len(headers)]}


def figure(table: SweepTable):
    """The target against each swept setting, one panel per setting; the best run's point is a star."""

    fig = make_subplots(rows=1, cols=max(1, len(table.fields)), shared_yaxes=True, subplot_titles=table.fields)
    scored = [r for r in table.rows if r.target is not None]
    for col, name in enumerate(table.fields, 1):
        fig.add_trace(go.Scatter(x=[r.values.get(name) for r in scored], y=[r.target for r in scored], mode="markers",
                                 text=[r.run_id for r in scored], showlegend=False,
                                 marker={"size": [16 if r.best else 9 for r in scored],
                                         "symbol": ["star" if r.best else "circle" for r in scored]}),
                      row=1, col=col)
        if all(isinstance(r.values.get(name), (int, float)) and r.values.get(name) > 0 for r in scored) and \
                name in ("learning_rate", "weight_decay"):
            fig.update_xaxes(type="log", row=1, col=col)  # rates are swept over orders of magnitude
    fig.update_yaxes(title_text=table.target, row=1, col=1)
    fig.update_layout(height=320, margin={"l": 50, "r": 20, "t": 40, "b": 40})
    return fig


def show(ctx: UIContext, lang: str | None, sweep_id: str | None) -> tuple:
    """(note, table, figure, best run id or None) of one sweep."""
    def msg(key, **values):
        return ctx.msg(lang, key, **values)

    table = sweep_table(ctx.workspace, sweep_id) if sweep_id else None
    if table is None:
        return msg("runs.sweep.none"), None, None, None
    best = table.best
    if best is None:
        note = msg("runs.sweep.no_best", target=table.target)
    else:
        values = ", ".join(f"{k}={v}" for k, v in best.values.items())
        note = msg("runs.sweep.best", target=table.target, direction=table.direction, run_id=best.run_id,
                   values=values, value=best.target)
    return note, table_rows(msg, table), figure(table), best.run_id if best else None


def open_in(tab: str, best: str | None):
    """The best run becomes the shared run and `tab` is shown (nothing changes without a best run)."""
    if not best:
        return gr.update(), gr.update()
    return best, gr.Tabs(selected=tab)


def _rounded(value):
    return None if value is None else round(float(value), 4)


def build(ctx: UIContext) -> None:
    """The section, inside the compare view."""
    private = {"api_visibility": "private"}
    gr.Markdown(ctx.t("runs.sweep"), elem_id="runs-sweep-title")
    with gr.Row(equal_height=True):
        pick = gr.Dropdown([], label=ctx.t("runs.sweep.pick"), scale=3, elem_id="runs-sweep-pick")
        refresh = gr.Button(ctx.t("runs.sweep.refresh"), scale=0, elem_id="runs-sweep-refresh")
    note = gr.Markdown(elem_id="runs-sweep-note")
    table = gr.Dataframe(interactive=False, elem_id="runs-sweep-table")
    plot = gr.Plot(elem_id="runs-sweep-chart")
    best = gr.State(None)
    with gr.Row():
        buttons = {tab: gr.Button(ctx.t(f"runs.sweep.open_{tab}"), size="sm", elem_id=f"runs-sweep-open-{tab}")
                   for tab in OPEN_TABS}

    def do_choices():
        choices = sweep_choices(ctx)
        return gr.update(choices=choices, value=choices[0][1] if choices else None)

    def do_show(lang, sweep_id):
        return show(ctx, lang, sweep_id)

    gr.context.Context.root_block.load(do_choices, None, pick, **private)
    pick.focus(lambda current: gr.update(choices=sweep_choices(ctx), value=current), pick, pick, **private)
    for trigger in (pick.change, ctx.lang.change, refresh.click):
        trigger(do_show, [ctx.lang, pick], [note, table, plot, best], **private)
    shared_run, tabs = ctx.shared.get("run_id"), ctx.shared.get("tabs")
    if shared_run is not None and tabs is not None:
        for tab, button in buttons.items():
            opened = button.click(lambda b, tab=tab: open_in(tab, b), best, [shared_run, tabs], **private)
            ctx.timers.switched_by(opened, tab, when=best)  # open_in switches with a best run only
