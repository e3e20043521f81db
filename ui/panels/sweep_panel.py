"""The Train tab's sweep section: up to three settings of the form, each with a list of values,
a target and a budget; "Check" shows the runs and their time, "Queue sweep" queues them.

The form above is the base of every run; each combination goes through RunConfig's validation
(backend/sweeps/grid.py) before anything is queued, so a refused sweep is one sentence and no run.
"""

from __future__ import annotations

import gradio as gr
import yaml

from backend.config_policy import ConfigError
from backend.messages import message_of, msg
from backend.runs.info import RunError
from backend.sweeps.cli import run_estimates, total_text
from backend.sweeps.grid import FIELDS, MAX_FIELDS, TARGETS, SweepError, parse_sweep
from backend.sweeps.queueing import planned_configs, queue_sweep
from backend.training.estimate import short_duration
from ui import forms
from ui.context import UIContext
from ui.i18n import localize
from ui.texts.sweep_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)


def sweep_data(fields: list, values: list, target: str, direction: str, max_runs, sample, seed) -> dict:
    """The sweep file's mapping from the section's widgets (empty rows left out)."""
    grid = {}
    for name, text in zip(fields, values):
        name, text = (name or "").strip(), (text or "").strip()
        if not name and not text:
            continue
        try:
            parsed = yaml.safe_load(f"[{text}]")
        except yaml.YAMLError:
            parsed = [v.strip() for v in text.split(",") if v.strip()]
        grid[name] = parsed
    data = {"grid": grid, "target": target or "eval_loss", "max_runs": int(max_runs or 0) or None,
            "seed": int(seed or 0)}
    if direction in ("min", "max"):
        data["direction"] = direction
    if sample:
        data["sample"] = int(sample)
    return data


def plan_sweep(ctx: UIContext, lang: str, model: str, dataset: str, sweep_values: list, form_values: list):
    """(sweep, base config, run configs, estimates); raises ConfigError / SweepError with the sentence."""

    base = forms.config_from_values(list(form_values), model, dataset)
    ctx.check_code_settings(base)  # every run of the sweep would carry it
    sweep = parse_sweep(sweep_data(*_split(sweep_values)))
    configs = planned_configs(sweep, base)
    return sweep, base, configs, run_estimates(configs, ctx.workspace)


def describe(ctx: UIContext, lang: str, sweep, configs, estimates) -> str:
    lines = [ctx.msg(lang, "train.sweep.plan", count=len(configs), fields=", ".join(sweep.fields), target=sweep.target,
                     direction=sweep.direction)]
    for index, (config, estimate) in enumerate(zip(configs, estimates), 1):
        shown = ", ".join(f"`{f}={getattr(config, f)}`" for f in sweep.fields)
        lines.append(f"{index}. {shown}" + (f": ~{short_duration(estimate.seconds_mid)} ({estimate.source})"
                                            if estimate else ""))
    total = total_text(estimates)
    return "\n".join(lines) + (f"\n\n{total}" if total else "")


def check(ctx: UIContext, lang: str, model: str, dataset: str, *values) -> str:
    sweep_values, form_values = values[:SWEEP_INPUTS], values[SWEEP_INPUTS:]
    try:
        sweep, _base, configs, estimates = plan_sweep(ctx, lang, model, dataset, list(sweep_values), list(form_values))
    except (ConfigError, SweepError) as error:
        return f"⚠️ {localize(message_of(error) or error, lang)}"
    return describe(ctx, lang, sweep, configs, estimates)


def queue_runs(ctx: UIContext, lang: str, model: str, dataset: str, *values) -> str:
    sweep_values, form_values = values[:SWEEP_INPUTS], values[SWEEP_INPUTS:]
    try:
        sweep, base, configs, estimates = plan_sweep(ctx, lang, model, dataset, list(sweep_values), list(form_values))
        record = queue_sweep(ctx.store, sweep, base, [e.to_dict() if e else None for e in estimates])
    except (ConfigError, SweepError, RunError) as error:
        return f"⚠️ {localize(message_of(error) or error, lang)}"

    head = localize(msg("sweep.queued", sweep_id=record["sweep_id"], count=len(record["runs"]), total=""), lang)
    runs = ", ".join(r["run_id"] for r in record["runs"])
    return f"{head}\n\n{ctx.msg(lang, 'train.sweep.queued_runs', runs=runs)}\n\n{describe(ctx, lang, sweep, configs, estimates)}"


SWEEP_INPUTS = 2 * MAX_FIELDS + 5  # fields, values, target, direction, max_runs, sample, seed


def _split(values: list) -> tuple:
    n = MAX_FIELDS
    fields, texts, (target, direction, max_runs, sample, seed) = values[:n], values[n:2 * n], values[2 * n:]
    return list(fields), list(texts), target, direction, max_runs, sample, seed


def build(ctx: UIContext, head: list, form: list) -> None:
    """The section, below the Start row; `head` = [lang, model, dataset], `form` the Train form's inputs."""
    private = {"api_visibility": "private"}
    t = ctx.t
    with gr.Accordion(t("train.sweep.section"), open=False, elem_id="train-section-sweep"):
        gr.Markdown(t("train.sweep.intro"))
        fields, texts = [], []
        for n in range(1, MAX_FIELDS + 1):
            with gr.Row():
                fields.append(gr.Dropdown(["", *FIELDS], value="", allow_custom_value=True, label=f"#{n}",
                                          elem_id=f"sweep-field-{n}", scale=1))
                texts.append(gr.Textbox(label=f"#{n} =", placeholder="1e-4, 3e-4, 1e-3", elem_id=f"sweep-values-{n}",
                                        scale=2))
        with gr.Row():
            target = gr.Dropdown(list(TARGETS), value="eval_loss", label=t("train.sweep.target"), elem_id="sweep-target")
            direction = gr.Radio(["auto", "min", "max"], value="auto", label=t("train.sweep.direction"),
                                 info=t("train.sweep.direction.auto"), elem_id="sweep-direction")
            max_runs = gr.Number(16, precision=0, minimum=1, label=t("train.sweep.max_runs"), elem_id="sweep-max-runs")
            sample = gr.Number(0, precision=0, minimum=0, label=t("train.sweep.sample"), elem_id="sweep-sample")
            seed = gr.Number(0, precision=0, minimum=0, label=t("train.sweep.seed"), elem_id="sweep-seed")
        with gr.Row():
            check_button = gr.Button(t("train.sweep.check"), elem_id="sweep-check")
            queue_button = gr.Button(t("train.sweep.queue"), variant="primary", elem_id="sweep-queue")
        message = gr.Markdown(elem_id="sweep-message")
    inputs = [*head, *fields, *texts, target, direction, max_runs, sample, seed, *form]

    def do_check(*values):
        return check(ctx, *values)

    def do_queue(*values):
        return queue_runs(ctx, *values)

    check_button.click(do_check, inputs, message, **private)
    queue_button.click(do_queue, inputs, message, **private)
