"""The Plan's time estimate and its "Measure speed" button (Train tab).

The estimate is backend/training/estimate.py's, with its source said (this machine's earlier runs
of the settings, a speed probe, or the FLOPs guess) and a range. "Measure speed" starts the speed
probe as a background job (backend/runs/jobs.py: its own process, so the page stays responsive
and a closed browser does not stop it), refused while a run holds the devices; the handler only
polls the job's progress file and shows the new estimate when it is done.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import gradio as gr

from backend.config_policy import ConfigError
from backend.messages import msg as backend_msg
from backend.models.hardware import training_devices
from backend.runs import jobs
from backend.runs.files import read_status
from backend.runs.info import RunError
from backend.runs.jobs import COMPLETED, RUNNING, read_progress, stage_of
from backend.scale import launch
from backend.training.estimate import estimate_run_seconds
from backend.training.speed_probe import PROBE_STEPS
from ui import forms
from ui.context import UIContext
from ui.i18n import localize
from ui.texts.estimate_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)
from ui.views.run_view import duration, stage_text
from ui.views.train_summary import devices_from_state

POLL_S = 1.0
PROBE_LIMIT_S = 600  # the handler stops polling after this; the job still ends on its own


def time_text(ctx: UIContext, lang: str, model: str, dataset: str, devices: list[dict] | None, *values) -> str:
    """The estimate line for the form as it is now ('' while the form does not validate: the Plan says why)."""

    try:
        config = forms.config_from_values(list(values), model, dataset)
    except ConfigError:
        return ""
    found = devices_from_state(devices)
    try:
        targets = training_devices(config.devices, found) if found else None
        estimate = estimate_run_seconds(config, ctx.workspace, devices=targets)
    except Exception as error:  # noqa: BLE001 - no estimate is a sentence in the Plan, never a failed page
        return f"{ctx.msg(lang, 'train.time.header')} {localize(backend_msg('estimate.unavailable', reason=error), lang)}"
    return f"{ctx.msg(lang, 'train.time.header')} {localize(estimate.message(), lang)}"


def busy_text(ctx: UIContext, lang: str, config, devices: list[dict] | None) -> str | None:
    """The sentence when a live run holds a device the probe would train on, else None."""

    found = devices_from_state(devices)
    held = launch.held_devices(config, training_devices(config.devices, found))
    busy = ctx.store.busy_devices()
    taken = [d for d in held if d in busy]
    if not taken:
        return None
    return localize(backend_msg("probe.busy", devices=", ".join(taken), run_id=busy[taken[0]]), lang)


def start_probe(ctx: UIContext, config) -> tuple[object, object]:
    """Launch the probe job; (progress file, log file)."""

    folder = ctx.workspace.root / "speed" / "jobs"
    folder.mkdir(parents=True, exist_ok=True)
    name = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
    config_file = folder / f"{name}.yaml"
    config.save(config_file)
    progress, log = folder / f"{name}.json", folder / f"{name}.log"
    jobs.launch_job("backend.training.speed_probe", ["--config", str(config_file), "--workspace", str(ctx.workspace.root)],
                log, progress)
    return progress, log


def probe_text(ctx: UIContext, lang: str, progress: dict, started: float) -> str | None:
    """What the running probe does now, from its scratch run's status.json (speed_probe.py names the
    folder): the stage before training (the model's build, replay answers, a wait for another
    process's) or its step; None before the worker wrote anything."""

    status = read_status(Path(progress["run_dir"])) if progress.get("run_dir") else {}
    elapsed = duration(time.time() - started) or "-"
    if status.get("stage"):
        return ctx.msg(lang, "train.time.probe_stage",
                       stage=stage_text(lambda key, **v: ctx.msg(lang, key, **v), status["stage"], elapsed))
    if status.get("global_step"):
        return ctx.msg(lang, "train.time.probe_step", step=status["global_step"],
                       steps=status.get("max_steps") or PROBE_STEPS, elapsed=elapsed)
    return None


def measure(ctx: UIContext, lang: str, model: str, dataset: str, devices: list[dict] | None, *values):
    """Generator: (message, time estimate) while the probe runs, then with its result."""

    try:
        config = forms.config_from_values(list(values), model, dataset)
        ctx.check_code_settings(config)  # the probe trains a few steps: it would run the code
        refusal = busy_text(ctx, lang, config, devices)
    except (ConfigError, RunError, ValueError) as error:
        yield ctx.msg(lang, "train.msg.invalid", error=localize(error, lang)), gr.update()
        return
    if refusal:
        yield f"⚠️ {refusal}", gr.update()
        return
    progress_file, log = start_probe(ctx, config)

    yield localize(backend_msg("probe.started", steps=PROBE_STEPS), lang), gr.update()
    deadline, started, said = time.monotonic() + PROBE_LIMIT_S, time.time(), None
    progress = read_progress(progress_file)
    while progress.get("state") == RUNNING and time.monotonic() < deadline:
        time.sleep(POLL_S)
        progress = read_progress(progress_file)
        now = probe_text(ctx, lang, progress, started) if progress.get("state") == RUNNING else None
        if now and now != said:  # a wait names what it waits for, with its count
            said = now
            yield now, gr.update()
    if progress.get("state") == COMPLETED:
        yield (localize(stage_of(progress), lang),
               time_text(ctx, lang, model, dataset, devices, *values))
        return
    error = progress.get("error") or stage_of(progress)
    yield f"⚠️ {localize(backend_msg('probe.failed', error=error, log=log), lang)}", gr.update()


def build(ctx: UIContext) -> dict:
    """The estimate line and the button, placed where it is called (below the Plan's numbers)."""
    with gr.Row(equal_height=True):
        c = {"time": gr.Markdown(elem_id="train-time"),
             "measure": gr.Button(ctx.t("train.time.measure"), size="sm", scale=0, elem_id="train-measure-speed")}
    c["measure_message"] = gr.Markdown(elem_id="train-measure-message")
    return c


def wire(ctx: UIContext, c: dict, head: list, devices_state, form: list) -> None:
    """`head` = [lang, model, dataset]; `form`: the Train form's inputs (forms.NAMES order)."""
    private = {"api_visibility": "private"}
    inputs = [*head, devices_state, *form]

    def do_time(*values):
        return time_text(ctx, *values)

    def do_measure(*values):
        yield from measure(ctx, *values)

    lang, model, dataset = head
    gr.on([model.change, dataset.change, lang.change, devices_state.change, *[f.change for f in form]],
          do_time, inputs, c["time"], trigger_mode="always_last", show_progress="hidden", **private)
    c["measure"].click(do_measure, inputs, [c["measure_message"], c["time"]], **private)
