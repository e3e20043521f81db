"""Gradio inputs built from RunConfig's field metadata, and back.

The Train tab's form is a view of RunConfig: each field's metadata names its
section of the form and its bounds (backend/config_policy.py), the widget
follows from its type; the help text and choices come from the dataclass, so
the form, the YAML and the command line never disagree. Values travel as one
ordered list (gradio passes inputs positionally); `config_from_values`
rebuilds the RunConfig through `RunConfig.from_dict`, which validates it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, get_args, get_origin, get_type_hints

from backend.config import RunConfig, stage_switch
from backend.config_policy import FORM_GROUPS, Bounds, ConfigError, hint_is_number
from backend.config_recipes import recipe_config
from backend.models.memory import LINEAR_NAMES
from ui import grpo_form
from ui.texts.config_help import help_zh
from ui.texts.forms_texts import CHOICE_TEXT, FIELD_LABELS, PLACEHOLDERS  # noqa: F401  (CHOICE_TEXT: read by the Train tab)


@dataclass(frozen=True)
class FieldSpec:
    name: str                 # RunConfig field (or "method_choice", see below)
    widget: str               # number | slider | checkbox | dropdown | radio | text | multiselect | optional_number
    minimum: float | None = None  # the field's bounds (RunConfig metadata), as RunConfig.validate checks them
    maximum: float | None = None
    step: float | None = None


# "method" and "quantization_bits" are one choice for a user.
METHOD_CHOICES = {"lora": ("lora", None), "qlora4": ("qlora", 4), "qlora8": ("qlora", 8), "full": ("full", None)}
JOINED = {"method": "method_choice", "quantization_bits": "method_choice"}
# gradient_checkpointing is "auto" | True | False; the form shows auto / on / off.
CHECKPOINTING_CHOICES = {True: "on", False: "off", "auto": "auto"}
# How a field looks, where its type and bounds leave a choice: a few choices read best as a row of
# radio buttons (else a dropdown); a share of something in [0, 1) as a slider (else a number box).
RADIOS = {"method_choice", "precision", "gradient_checkpointing", "stage", "overflow"}
SLIDERS = {"lora_dropout", "warmup_ratio", "val_size"}


def _widget(name: str, hint: Any, meta: dict) -> str:
    args = set(get_args(hint)) or {hint}
    if name in RADIOS or meta.get("choices"):
        return "radio" if name in RADIOS else "dropdown"
    if bool in args:
        return "checkbox"
    if any(get_origin(a) is list for a in args):
        return "multiselect"
    if hint_is_number(hint):
        if type(None) in args:
            return "optional_number"  # a text box: empty means unset (see OPTIONAL_NUMBERS)
        return "slider" if name in SLIDERS else "number"
    return "text"


def form_specs(cls: type = RunConfig) -> dict[str, list[FieldSpec]]:
    """The form's sections (RunConfig metadata "form"), each a list of FieldSpec in field order
    (checkboxes last), with the bounds RunConfig.validate checks."""
    hints = get_type_hints(cls)
    sections: dict[str, list[FieldSpec]] = {group: [] for group in FORM_GROUPS}
    for f in fields(cls):
        if f.metadata["form"] not in sections:
            continue  # the tab's own model / dataset pickers, or YAML only
        name = JOINED.get(f.name, f.name)
        if any(spec.name == name for spec in sections[f.metadata["form"]]):
            continue
        bounds = f.metadata.get("bounds") or Bounds()
        kind = "radio" if name == "method_choice" else _widget(name, hints[f.name], f.metadata)
        if kind in ("number", "slider"):
            sections[f.metadata["form"]].append(FieldSpec(name, kind, bounds.low, bounds.high, bounds.step))
        else:
            sections[f.metadata["form"]].append(FieldSpec(name, kind))
    # Checkboxes last in their section: short toggles with long help read best side by side.
    return {group: sorted(specs, key=lambda spec: spec.widget == "checkbox") for group, specs in sections.items()}


SECTIONS = form_specs()
MODEL_FIELDS, DATA_FIELDS, METHOD_FIELDS = SECTIONS["model"], SECTIONS["data"], SECTIONS["method"]
LORA_FIELDS, TRAIN_FIELDS, PREFERENCE_FIELDS = SECTIONS["lora"], SECTIONS["training"], SECTIONS["preference"]
ADVANCED_FIELDS, SCALE_FIELDS = SECTIONS["advanced"], SECTIONS["scale"]
ALL_FIELDS = [spec for group in FORM_GROUPS for spec in SECTIONS[group]]
# The form's values: the fields' widgets, then the GRPO rewards' (ui/grpo_form.py: RunConfig's
# rewards / reward_functions / reward_weights, which are YAML-only fields without a generic widget).
FIELD_NAMES = [spec.name for spec in ALL_FIELDS]
NAMES = [*FIELD_NAMES, *grpo_form.NAMES]
# Optional numbers are text boxes, empty when unset with a placeholder saying what empty means:
# gradio 6.31's number box cannot be empty (its frontend turns a missing value into 0). A typed
# 0 also means empty; RunConfig refuses text that is not a number.
OPTIONAL_NUMBERS = {spec.name for spec in ALL_FIELDS if spec.widget == "optional_number"}
# Sliders need both ends; a field whose bounds leave one open is a number box.
assert all(s.minimum is not None and s.maximum is not None for s in ALL_FIELDS if s.widget == "slider"), SLIDERS


def help_text(name: str, lang: str = "en") -> str:
    """The field's help from RunConfig (English) or ui/texts/config_help.py (Chinese)."""

    def one(field: str) -> str:
        english = RunConfig.help_for(field)
        return help_zh(field, english) if lang == "zh" else english

    if name == "method_choice":
        return one("method") + " " + one("quantization_bits")
    return one(name)


def method_choice(config: RunConfig) -> str:
    if config.method == "qlora":
        return "qlora8" if config.quantization_bits == 8 else "qlora4"
    return config.method


def form_values(config: RunConfig) -> list[Any]:
    """The form's values for `config`, in NAMES order."""
    values, rewards = [], grpo_form.form_values(config)
    for name in NAMES:
        if name in rewards:
            values.append(rewards[name])
        elif name == "method_choice":
            values.append(method_choice(config))
        elif name == "lora_target":
            target = config.lora_target
            values.append([target] if isinstance(target, str) else list(target))
        elif name in OPTIONAL_NUMBERS:
            value = getattr(config, name)
            values.append("" if value is None else f"{value:g}")
        elif name == "gradient_checkpointing":
            values.append(CHECKPOINTING_CHOICES.get(config.gradient_checkpointing, "auto"))
        else:
            values.append(getattr(config, name))
    return values


def _optional_number(value: Any) -> Any:
    """A text box's optional number: empty or 0 -> None; other text goes to RunConfig, which checks it."""
    text = "" if value is None else str(value).strip()
    try:
        return None if not text or float(text) == 0 else text
    except ValueError:
        return text


def config_from_values(values: list[Any], model: str, dataset: str, base: RunConfig | None = None) -> RunConfig:
    """A validated RunConfig from the form values (NAMES order); raises ConfigError."""
    data = (base or RunConfig()).to_dict()
    data.update(model_name_or_path=model or data["model_name_or_path"], dataset=dataset or data["dataset"])
    rewards = {}
    for name, value in zip(NAMES, values):
        if name in grpo_form.NAMES:
            rewards[name] = value
        elif name == "method_choice":
            data["method"], data["quantization_bits"] = METHOD_CHOICES.get(value, ("lora", None))
        elif name == "lora_target":
            names = [v for v in (value or []) if v]
            data[name] = "all-linear" if not names or "all-linear" in names else names
        elif name in OPTIONAL_NUMBERS:
            data[name] = _optional_number(value)  # empty or 0: off / all / one per device
        elif name == "gradient_checkpointing":
            data[name] = {"on": True, "off": False}.get(value, "auto")
        elif name == "devices":
            data[name] = (value or "").strip() or "auto"
        elif isinstance(value, str) and value.strip() == "":
            data[name] = None  # a cleared box means "empty" (off / all / default)
        else:
            data[name] = value
    data.update(grpo_form.config_fields(rewards))
    return RunConfig.from_dict(data)


def stage_form_values(values: list[Any], previous_stage: str) -> list[Any]:
    """The form moved from `previous_stage` to the stage now in `values`: settings
    still at the old stage's defaults take the new stage's (backend.config.stage_switch)."""

    data = dict(zip(NAMES, values))
    stage = data["stage"]
    data["stage"], data["rewards"] = previous_stage, grpo_form.config_fields(data).get("rewards", [])
    moved = stage_switch(data, stage)
    if moved["rewards"] != data["rewards"]:  # presets at the old stage's default take the new stage's
        moved = grpo_form.with_rewards(moved, moved["rewards"])
    return [moved.get(name, value) for name, value in zip(NAMES, values)]


def form_defaults(ctx) -> RunConfig:
    """What the Train form starts with: the last started config (settings.json), else the app's
    recipe (RunConfig's defaults: the starter)."""

    saved = ctx.saved().get("train")
    try:
        return RunConfig.from_dict(saved) if saved else recipe_config(ctx.recipe)
    except ConfigError:
        return recipe_config(ctx.recipe)


def prefill_values(config_values: dict) -> list[Any]:
    """(model, dataset, *form values) for a RunConfig given as a dict (e.g. "Train on these votes")."""
    config = RunConfig.from_dict(config_values)
    return [config.model_name_or_path, config.dataset, *form_values(config)]


def build_inputs(ctx, specs: list[FieldSpec], defaults: RunConfig) -> dict[str, Any]:
    """One gradio component per spec, labelled `train.field.<name>`, with the field's help as info."""
    import gradio as gr

    values = dict(zip(NAMES, form_values(defaults)))
    components = {}
    for spec in specs:
        label, info, value = ctx.t(f"train.field.{spec.name}"), ctx.t(f"train.help.{spec.name}"), values[spec.name]
        common = {"label": label, "info": info, "elem_id": f"train-{spec.name.replace('_', '-')}"}
        if spec.widget == "number":
            component = gr.Number(value=value, minimum=spec.minimum, maximum=spec.maximum, step=spec.step,
                                  **common)
        elif spec.widget == "optional_number":
            component = gr.Textbox(value=value, placeholder=ctx.t(f"train.placeholder.{spec.name}"), **common)
        elif spec.widget == "slider":
            component = gr.Slider(spec.minimum, spec.maximum, value=value, step=spec.step, **common)
        elif spec.widget == "checkbox":
            component = gr.Checkbox(value=value, **common)
        elif spec.widget == "multiselect":
            component = gr.Dropdown(["all-linear", *LINEAR_NAMES], value=value, multiselect=True,
                                    allow_custom_value=True, **common)
        elif spec.widget in ("dropdown", "radio"):
            choices = _choices(spec.name, ctx.t)
            maker = gr.Radio if spec.widget == "radio" else gr.Dropdown
            component = maker(choices, value=value, **common)
        else:
            component = gr.Textbox(value=value or "", **common)
        components[spec.name] = component
    return components


def _choices(name: str, t) -> list:
    if name == "method_choice":
        return [(t(f"train.choice.{name}.{key}"), key) for key in METHOD_CHOICES]
    if name == "gradient_checkpointing":
        return [(t(f"train.choice.{name}.{key}"), key) for key in ("auto", "on", "off")]
    return [c for c in RunConfig.choices_for(name) if c is not None]


FIELD_TEXT: dict[str, dict[str, str]] = {f"train.field.{name}": text for name, text in FIELD_LABELS.items()}
assert set(FIELD_TEXT) == {f"train.field.{n}" for n in FIELD_NAMES}
FIELD_TEXT |= grpo_form.FIELD_TEXT
PLACEHOLDER_TEXT: dict[str, dict[str, str]] = {f"train.placeholder.{name}": text
                                               for name, text in PLACEHOLDERS.items()}
assert set(PLACEHOLDER_TEXT) == {f"train.placeholder.{n}" for n in OPTIONAL_NUMBERS}
# Help under each field, in both languages (translated in the browser like the labels).
HELP_TEXT: dict[str, dict[str, str]] = {f"train.help.{n}": {"en": help_text(n), "zh": help_text(n, "zh")}
                                        for n in FIELD_NAMES} | grpo_form.HELP_TEXT
