"""Train tab: pick a model and a recipe, see what it will cost, start it.

The form is a view of RunConfig (ui/forms.py). Start hands the config to the
RunStore, which launches a worker process: nothing trains in this process.
Handlers are module functions taking the UIContext first, so tests call them
with the values a browser would send.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import gradio as gr

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.config_recipes import suggested_settings
from backend.data.identity_rows import IDENTITY_FIELDS
from backend.data.saved_datasets import list_workspace_datasets
from backend.models.hardware import as_dicts, detect_devices
from backend.models.loading import has_own_chat_template
from backend.models.memory import architecture_for
from backend.models.offline import OFFLINE_MODELS
from backend.models.presets import PRESETS
from backend.runs import queue
from backend.runs.store import RunError
from backend.storage.safe_names import UnsafeName, clean_name, path_inside
from ui import forms, grpo_form
from ui.context import UIContext
from ui.i18n import localize
from ui.panels import estimate_panel, grpo_section, local_models_panel, sweep_panel, train_watch_panel
from ui.run_actions import resume, stop
from ui.texts import train_texts
from ui.views import grpo_plan, scale_view
from ui.views import train_summary as summary
from ui.warmup import import_heavy_libraries

TEXT: dict[str, dict[str, str]] = {
    **forms.FIELD_TEXT,
    **forms.HELP_TEXT,
    **forms.PLACEHOLDER_TEXT,
    **forms.CHOICE_TEXT,
    **estimate_panel.TEXT,
    **local_models_panel.TEXT,
    **sweep_panel.TEXT,
    **grpo_form.TEXT,
    **grpo_plan.TEXT,
    **train_watch_panel.TEXT,
    **train_texts.TEXT,
}


def _msg(ctx: UIContext, lang: str | None):
    return lambda key, **values: ctx.msg(lang, key, **values)


# --- handlers ---------------------------------------------------------------

def restore_form(ctx: UIContext) -> list:
    """(model, dataset, *form values) from the saved settings, for every page load: the components'
    own values are those of the app's start, so a reload would show them and Start would train on them."""
    config = forms.form_defaults(ctx)  # the last started config, read fresh
    dataset = ctx.saved().get("dataset") or config.dataset  # saved in Data, or used by the last Start
    return [config.model_name_or_path, gr.update(value=dataset, choices=_dataset_choices(ctx)),
            *forms.form_values(config)]


def restore_changes(restored: list, start: list, current: list) -> list:
    """restore_form's values, each as an update only where it changes what the page shows and the user
    has not edited it yet (the page's value is still the app start's): a page load that set every field
    fired every field's change handlers (the Plan, the rows, the estimate) at once, and one that ran late,
    on a busy machine, overwrote what the user had just typed."""
    def value(item):
        return item.get("value") if isinstance(item, dict) else item

    return [gr.skip() if not _same(now, was) or _same(value(new), now) else new
            for new, was, now in zip(restored, start, current, strict=True)]


def _same(a, b) -> bool:
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    return a == b


def detect_hardware(ctx: UIContext, lang: str) -> tuple[str, list[dict]]:
    import_heavy_libraries()

    devices = detect_devices()
    return summary.hardware_text(_msg(ctx, lang), devices), as_dicts(devices)


def check_model(ctx: UIContext, lang: str, model: str) -> str:
    return summary.model_text(_msg(ctx, lang), (model or "").strip(), ctx.workspace, lang)


def suggest(ctx: UIContext, lang: str, model: str, *values) -> tuple[str, list[Any] | None]:
    """(text, form values) proposing the learning rate and epochs for the picked model's size, as a
    change the user takes with a click or leaves; ("", None) when the form already has them."""

    model = (model or "").strip()
    try:
        current = forms.config_from_values(list(values), model, "identity")
        size = None if model in ("demo", "demo-tiny") else architecture_for(model, ctx.workspace.models_dir).num_parameters()
    except (ConfigError, ValueError, OSError):
        return "", None
    settings, why = suggested_settings(model, size, current.method)
    changes = {k: v for k, v in settings.items() if k in forms.NAMES and getattr(current, k) != v}
    if not changes:
        return "", None
    listed = ", ".join(f"`{k}` {v:g} ({_msg(ctx, lang)('train.suggest.now')} {getattr(current, k):g})"
                       for k, v in changes.items())
    text = _msg(ctx, lang)("train.suggest", size=f"{size / 1e6:,.0f} M" if size else "2 M", settings=listed,
                           why=localize(why, lang))
    return text, forms.form_values(dataclasses.replace(current, **changes))


SUGGESTED_FIELDS = ("learning_rate", "num_train_epochs")  # all that backend.config_recipes.suggested_settings sets


def take_suggestion(proposed: list[Any] | None, *values) -> list[Any]:
    """The form as it is now with only the suggested fields taken from `proposed`: other fields the
    user changed after the proposal was made keep their new values."""
    if not proposed:
        return list(values)
    taken = list(values)
    for name in SUGGESTED_FIELDS:
        if name in forms.NAMES:
            taken[forms.NAMES.index(name)] = proposed[forms.NAMES.index(name)]
    return taken


ROWS_FIELDS = ("chat_template", "stage")  # count_rows' settings after the model


def count_rows(ctx: UIContext, dataset: str, dataset_name: str | None = None, model: str = "",
               chat_template: str = "auto", stage: str = "sft") -> dict:
    return summary.dataset_rows((dataset or "identity").strip(), ctx.workspace, (dataset_name or "").strip() or None,
                                (model or "").strip(), chat_template or "auto", stage or "sft")


def plan(ctx: UIContext, lang: str, model: str, dataset: str, rows: dict, devices: list[dict],
         *values) -> tuple[str, str]:
    """(derived numbers, memory estimate) for the form as it is now."""
    msg = _msg(ctx, lang)
    try:
        config = forms.config_from_values(list(values), model, dataset)
        ctx.check_code_settings(config)  # before the Plan imports a reward function
        config.check_packages()  # e.g. wandb chosen but not installed: say how to install it now
    except ConfigError as error:
        return msg("train.msg.invalid", error=localize(error, lang)), ""
    found = summary.devices_from_state(devices)

    if config.stage == "grpo":  # prompts x completions, and the worker's checks before its model loads
        derived = grpo_plan.plan_text(msg, config, rows, scale_view.world_size(config, found), lang)
    else:
        derived = summary.derived_text(msg, config, rows, scale_view.world_size(config, found),
                                       has_own_chat_template(config.model_name_or_path, ctx.workspace.models_dir))
    template = summary.template_text(config, ctx.workspace, lang)  # the worker's own sentence, or its refusal
    return (derived + "\n\n" + scale_view.launch_text(msg, config, found) + (f"\n\n{template}" if template else ""),
            summary.estimate_text(msg, config, ctx.workspace, found, lang, rows))


def start(ctx: UIContext, lang: str, model: str, dataset: str, *values) -> tuple[str, str | None]:
    """Launch a worker for the form's config, or queue it behind the run on its devices;
    (message, new run id or None)."""
    msg = _msg(ctx, lang)
    try:
        config = forms.config_from_values(list(values), model, dataset)
        ctx.check_code_settings(config)  # an app open to other computers takes code from this machine only
        summary.check_template(config, ctx.workspace)  # the worker would refuse it the same way (exit 2)
        run_id = queue.enqueue(ctx.store, config)  # starts now when its devices are free, else waits
    except (ConfigError, RunError) as error:
        return msg("train.msg.invalid", error=localize(error, lang)), None
    # The dataset too: the one trained on last wins over one saved in Data before (restore_form).
    ctx.remember(model=config.model_name_or_path, dataset=config.dataset, train=config.to_dict())
    info = ctx.store.get(run_id)
    if info.state == "failed":  # the worker could not even be started (recorded in its status.json)
        return msg("train.msg.invalid", error=localize(info.error_message or info.error, lang)), run_id
    behind = queue.blocker(ctx.store, run_id) if info.waiting else None
    if behind:
        return msg("train.msg.queued", run_id=run_id, behind=behind), run_id
    return msg("train.msg.started", run_id=run_id), run_id


def show_command(ctx: UIContext, lang: str, model: str, dataset: str, *values) -> tuple[str, str, str]:
    """(message, shell command, YAML) that reproduce the run from a shell."""
    msg = _msg(ctx, lang)
    try:
        config = forms.config_from_values(list(values), model, dataset)
        argv, yaml_text = ctx.store.command_for(config)
        others = ctx.store.node_commands(config)
    except (ConfigError, RunError) as error:
        return msg("train.msg.invalid", error=localize(error, lang)), "", ""
    return msg("train.msg.command"), scale_view.command_text(argv, others, msg), yaml_text


def save_yaml(ctx: UIContext, lang: str, model: str, dataset: str, *values) -> tuple[str, str | None]:
    """Write the config under workspace/configs/ (the app serves files from the workspace only)."""
    msg = _msg(ctx, lang)
    try:
        config = forms.config_from_values(list(values), model, dataset)
    except ConfigError as error:
        return msg("train.msg.invalid", error=localize(error, lang)), None
    folder = ctx.workspace.root / "configs"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        path = path_inside(folder, f"{clean_name(config.run_name, 'train')}-{time.strftime('%Y%m%d-%H%M%S')}.yaml")
    except UnsafeName as error:  # the one check every user-typed file name passes
        return msg("train.msg.invalid", error=localize(error, lang)), None
    config.save(path)
    return msg("train.msg.saved", path=path.name), str(path)


def load_yaml(ctx: UIContext, lang: str, path: str | None) -> list:
    """(message, model, dataset, *form values); on a bad file only the message changes."""
    msg = _msg(ctx, lang)
    keep = [gr.update()] * (2 + len(forms.NAMES))
    if not path:
        return [gr.update(), *keep]
    try:
        config = RunConfig.load(Path(path))
    except ConfigError as error:
        return [msg("train.msg.invalid", error=f"{Path(path).name}: {localize(error, lang)}"), *keep]
    return [msg("train.msg.loaded", name=Path(path).name), config.model_name_or_path, config.dataset,
            *forms.form_values(config)]


# --- layout -----------------------------------------------------------------

def _dataset_choices(ctx: UIContext) -> list[str]:
    # The data backend's own listing: exactly the folders the worker accepts.

    names = [d["name"] for d in list_workspace_datasets(ctx.workspace.datasets_dir)]
    return ["identity", "demo", *[n for n in names if n not in ("identity", "demo")]]


def build(ctx: UIContext) -> None:
    defaults = forms.form_defaults(ctx)
    t = ctx.t
    model_choices = [*[(f"{m.label} · {name}", name) for name, m in OFFLINE_MODELS.items()],
                     ("Tiny demo model (2M, tests) · demo", "demo"),
                     *[(f"{p.label} ({hub_id})", hub_id) for hub_id, p in PRESETS.items() if hub_id not in OFFLINE_MODELS]]
    c: dict = {}
    with gr.Row():
        with gr.Column(scale=3):
            c["model"] = gr.Dropdown(model_choices, value=defaults.model_name_or_path, allow_custom_value=True,
                                     label=t("train.model"), info=t("train.model.info"), elem_id="train-model")
            c["model_check"] = gr.Markdown(elem_id="train-model-check")
            local_models_panel.build(ctx, c["model"], model_choices)  # the models other tools keep on disk
            with gr.Row():
                c["suggest"] = gr.Markdown(elem_id="train-suggest")
                c["suggest_apply"] = gr.Button(t("train.suggest.apply"), visible=False, size="sm", scale=0,
                                               elem_id="train-suggest-apply")
            c["suggested"] = gr.State(None)
            # A decision for the model shown above: off for any other model (see do_model_picked).
            inputs = forms.build_inputs(ctx, forms.MODEL_FIELDS, defaults)
            c["remote_warning"] = gr.Markdown(t("train.remote_warning"), visible=defaults.trust_remote_code)
        with gr.Column(scale=2):
            c["dataset"] = gr.Dropdown(_dataset_choices(ctx), value=defaults.dataset, allow_custom_value=True,
                                       label=t("train.dataset"), info=t("train.dataset.info"), elem_id="train-dataset")
            inputs |= forms.build_inputs(ctx, forms.DATA_FIELDS, defaults)
    with gr.Row():
        with gr.Column(scale=3):
            inputs |= forms.build_inputs(ctx, forms.METHOD_FIELDS, defaults)
        with gr.Column(scale=2):
            c["hardware"] = gr.Markdown(t("train.hardware.detecting"), elem_id="train-hardware")
            c["gpus"] = gr.CheckboxGroup([], label=t("train.gpus"), info=t("train.gpus.info"), visible=False,
                                         elem_id="train-gpus")
    for section, fields, is_open in (("lora", forms.LORA_FIELDS, True), ("training", forms.TRAIN_FIELDS, True),
                                     ("preference", grpo_section.preference_specs(), defaults.stage != "sft"),
                                     ("advanced", forms.ADVANCED_FIELDS, False), ("scale", forms.SCALE_FIELDS, False)):
        with gr.Accordion(t(f"train.section.{section}"), open=is_open,
                          elem_id=f"train-section-{section}") as c[f"section_{section}"], gr.Row():
            inputs |= forms.build_inputs(ctx, fields, defaults)
        if section == "preference":  # shown for stage grpo only
            c["section_grpo"], grpo_inputs = grpo_section.build(ctx, defaults)
            inputs |= grpo_inputs
    with gr.Accordion(t("train.section.plan"), open=True):
        with gr.Row():
            c["derived"] = gr.Markdown(elem_id="train-derived")
            c["estimate"] = gr.Markdown(elem_id="train-estimate")
        time_panel = estimate_panel.build(ctx)  # the time estimate and Measure speed
    with gr.Row():
        for key, variant in (("start", "primary"), ("stop", "stop"), ("resume", "secondary"),
                             ("show_command", "secondary"), ("save_yaml", "secondary")):
            c[key] = gr.Button(t(f"train.{key}"), variant=variant, elem_id=f"train-{key.replace('_', '-')}")
        c["load_yaml"] = gr.UploadButton(t("train.load_yaml"), file_types=[".yaml", ".yml"], elem_id="train-load-yaml")
    c["message"] = gr.Markdown(elem_id="train-message")
    c["watch"] = train_watch_panel.build(ctx)  # the started run's bar and loss line
    c["saved_file"] = gr.File(visible=False, interactive=False, height=60, show_label=False)
    c["command"] = gr.Code(language="shell", label=t("train.command"), interactive=False, visible=False,
                           elem_id="train-command")
    c["yaml"] = gr.Code(language="yaml", label=t("train.yaml"), interactive=False, visible=False)
    c["devices"], c["rows"] = gr.State(None), gr.State(None)
    c["trust"], c["dataset_name"] = inputs["trust_remote_code"], inputs["dataset_name"]
    c["stage"], c["last_stage"] = inputs["stage"], gr.State(defaults.stage)
    _wire(ctx, c, [inputs[name] for name in forms.NAMES])
    _wire_stage(ctx, c, [inputs[name] for name in forms.NAMES])
    _wire_identity(ctx, [inputs[name] for name in IDENTITY_FIELDS.values()])
    head = [ctx.lang, c["model"], c["dataset"]]
    estimate_panel.wire(ctx, time_panel, head, c["devices"], [inputs[name] for name in forms.NAMES])
    sweep_panel.build(ctx, head, [inputs[name] for name in forms.NAMES])  # a grid over the form's settings


def _wire_stage(ctx: UIContext, c: dict, form: list) -> None:
    """Stage changes move the stage defaults; "Train on these votes" (Chat) prefills the form."""
    private = {"api_visibility": "private"}

    def do_stage(previous, *values):
        return [*forms.stage_form_values(list(values), previous), values[forms.NAMES.index("stage")]]

    c["stage"].input(do_stage, [c["last_stage"], *form], [*form, c["last_stage"]], **private)
    c["stage"].change(lambda stage: gr.update(visible=grpo_section.visible(stage)), c["stage"], c["section_grpo"],
                      **private)
    prefill = ctx.shared.get("train_prefill")
    if prefill is not None:
        def do_prefill(values):
            if not values:
                return [gr.update()] * (4 + len(form))
            model, dataset, *rest = forms.prefill_values(values)
            return [model, gr.update(value=dataset, choices=_dataset_choices(ctx)), *rest, values.get("stage", "sft"),
                    gr.Accordion(open=True)]  # the preference settings in view

        prefill.change(do_prefill, prefill, [c["model"], c["dataset"], *form, c["last_stage"], c["section_preference"]],
                       **private)


def _wire_identity(ctx: UIContext, fields: list) -> None:
    """The form's identity_name / identity_author to the shared "identity" state: what the Data tab
    checks `{{name}}` / `{{author}}` as filled with (ui/context.py)."""
    identity = ctx.shared.get("identity")
    if identity is None:
        return
    for box in fields:
        box.change(lambda *values: dict(zip(IDENTITY_FIELDS.values(), values)), fields, identity,
                   api_visibility="private")


def _wire(ctx: UIContext, c: dict, form: list) -> None:
    lang, shared_dataset = ctx.lang, ctx.shared.get("dataset")
    private = {"api_visibility": "private"}
    head = [lang, c["model"], c["dataset"]]
    plan_inputs = [*head, c["rows"], c["devices"], *form]
    plan_outputs = [c["derived"], c["estimate"]]
    # A preference stage's rows are measured with the model's tokenizer: they follow these too.
    rows_inputs = [c["dataset"], c["dataset_name"], c["model"], *[form[forms.NAMES.index(n)] for n in ROWS_FIELDS]]

    def do_plan(*values):
        return plan(ctx, *values)

    def do_rows(*values):
        return count_rows(ctx, *values)

    def do_model(lang, model):
        return check_model(ctx, lang, model)

    def do_hardware_text(lang, devices):
        return summary.hardware_text(_msg(ctx, lang), summary.devices_from_state(devices))

    devices_box = form[forms.NAMES.index("devices")]

    def do_picker(devices, setting):
        found = summary.devices_from_state(devices)
        choices = scale_view.gpu_choices(found)
        return gr.update(choices=choices, value=scale_view.picked_from_setting(setting or "auto", found),
                         visible=bool(choices))

    def do_picked(picked, devices, setting):
        return scale_view.setting_from_picked(picked, summary.devices_from_state(devices), setting or "auto")

    c["gpus"].input(do_picked, [c["gpus"], c["devices"], devices_box], devices_box, **private)
    page = gr.context.Context.root_block
    restorable = [c["model"], c["dataset"], *form]
    start = [component.value for component in restorable]  # the app start's, what a fresh page shows
    page.load(lambda *current: restore_changes(restore_form(ctx), start, list(current)), restorable, restorable,
              **private)
    page.load(lambda lang: detect_hardware(ctx, lang), lang, [c["hardware"], c["devices"]], **private).then(
        do_picker, [c["devices"], devices_box], c["gpus"], **private).then(
        do_rows, rows_inputs, c["rows"], **private).then(do_plan, plan_inputs, plan_outputs, **private)
    for trigger in (page.load, c["model"].change, lang.change):
        trigger(do_model, [lang, c["model"]], c["model_check"], **private)

    def do_suggest(lang, model, *values):
        text, proposed = suggest(ctx, lang, model, *values)
        return text, gr.update(visible=proposed is not None), proposed

    def do_take(proposed, *values):
        return take_suggestion(proposed, *values)

    c["model"].change(do_suggest, [lang, c["model"], *form], [c["suggest"], c["suggest_apply"], c["suggested"]],
                      **private)
    c["suggest_apply"].click(do_take, [c["suggested"], *form], form, **private).then(
        lambda: ("", gr.update(visible=False), None), None, [c["suggest"], c["suggest_apply"], c["suggested"]],
        **private)
    lang.change(do_hardware_text, [lang, c["devices"]], c["hardware"], **private)
    for trigger in (c["dataset"].change, c["dataset_name"].change, c["model"].change,
                    *[form[forms.NAMES.index(n)].change for n in ROWS_FIELDS]):
        trigger(do_rows, rows_inputs, c["rows"], **private)
    c["dataset"].focus(lambda: gr.update(choices=_dataset_choices(ctx)), None, c["dataset"], **private)
    if shared_dataset is not None:  # a dataset saved in Data becomes the one to train on
        shared_dataset.change(lambda name: gr.update(value=name, choices=_dataset_choices(ctx)) if name else gr.update(),
                              shared_dataset, c["dataset"], **private)
    c["trust"].change(lambda on: gr.update(visible=on), c["trust"], c["remote_warning"], **private)
    # The user picked another model: trusting one model's code never carries over to the next.
    c["model"].input(lambda: False, None, c["trust"], **private)
    gr.on([c["model"].change, c["rows"].change, lang.change, *[f.change for f in form]],
          do_plan, plan_inputs, plan_outputs, trigger_mode="always_last", **private)

    _wire_actions(ctx, c, form)


def _wire_actions(ctx: UIContext, c: dict, form: list) -> None:
    """Start, Stop, Resume, the command and the YAML: the buttons under the form."""
    lang, shared_run, private = ctx.lang, ctx.shared.get("run_id"), {"api_visibility": "private"}
    head = [lang, c["model"], c["dataset"]]
    run_target = shared_run if shared_run is not None else gr.State(None)

    def do_start(*values):
        text, run_id = start(ctx, *values)
        return text, run_id or gr.update(), run_id or gr.update()  # a refused start keeps the selected run

    def do_command(*values):
        text, command, yaml_text = show_command(ctx, *values)
        return text, gr.update(value=command, visible=bool(command)), gr.update(value=yaml_text, visible=bool(yaml_text))

    def do_save(*values):
        text, path = save_yaml(ctx, *values)
        return text, gr.update(value=path, visible=bool(path))

    started = c["start"].click(do_start, [*head, *form], [c["message"], run_target, c["watch"]["run"]], **private)
    train_watch_panel.follow(ctx, c["watch"], started)
    c["stop"].click(lambda lang, r: stop(ctx, lang, r), [lang, run_target], c["message"], **private)
    c["resume"].click(lambda lang, r: resume(ctx, lang, r), [lang, run_target], c["message"], **private)
    c["show_command"].click(do_command, [*head, *form], [c["message"], c["command"], c["yaml"]], **private)
    c["save_yaml"].click(do_save, [*head, *form], [c["message"], c["saved_file"]], **private)
    c["load_yaml"].upload(lambda lang, p: load_yaml(ctx, lang, p), [lang, c["load_yaml"]],
                          [c["message"], c["model"], c["dataset"], *form], **private)
