"""Each RunConfig field carries its policy (backend/config_policy.py): bounds, form
section, way to the Trainer, resume rule. These tests hold the rule that every
field has all four, and that the form, the Trainer arguments and resume are
built from them: a new field declared once shows up in each."""

from __future__ import annotations

import dataclasses
from typing import get_type_hints

import gradio as gr
import pytest

from backend.config import RunConfig, _f
from backend.config_policy import (
    APP,
    CONVERTED,
    COPIED,
    FORM_GROUPS,
    MUST_MATCH,
    WARN,
    Bounds,
    ConfigError,
    copied,
    fields_with,
    hint_is_number,
    policy_gaps,
)
from backend.messages import Message
from backend.training.arguments import CONVERTERS, argument_values
from backend.training.cli import reconcile_resume
from ui import forms
from ui.context import UIContext
from ui.i18n import build_i18n, merge_texts
from ui.tabs import train


def _with(*new_fields) -> type:
    """RunConfig with extra fields, as if someone had just added them to backend/config.py."""
    return dataclasses.make_dataclass("RunConfigPlus", list(new_fields), bases=(RunConfig,))


def test_every_field_carries_all_four_parts_of_its_policy():
    assert policy_gaps(RunConfig) == []
    bare = _with(("new_knob", int, dataclasses.field(default=1, metadata={"help": "A new setting."})))
    gaps = policy_gaps(bare)
    assert len(gaps) == 4 and all(gap.startswith("new_knob: ") for gap in gaps), gaps
    for words in ("form should be one of", "trainer should be", "resume should be one of", "a number needs bounds"):
        assert any(words in gap for gap in gaps), (words, gaps)
    no_bounds = _with(("new_knob", int, _f(1, "A new setting.", form="advanced", trainer=APP, resume=WARN)))
    assert policy_gaps(no_bounds) == ["new_knob: a number needs bounds (Bounds(...), or ANY_NUMBER when every "
                                      "number is fine)"]
    outside = _with(("new_knob", int, _f(0, "A new setting.", form="advanced", trainer=APP, resume=WARN,
                                         bounds=Bounds(low=1, message="config.at_least_one"))))
    assert policy_gaps(outside) == ["new_knob: the default 0 is outside its own bounds"]
    unknown = _with(("new_knob", int, _f(1, "A new setting.", form="sidebar", trainer=copied(), resume="maybe",
                                         bounds=Bounds(low=1, message="no.such.message"))))
    assert len(policy_gaps(unknown)) == 4


def test_resume_reconciliation_follows_each_fields_policy():
    saved = RunConfig()
    assert reconcile_resume(saved, saved.with_overrides(["learning_rate=1e-4", "max_steps=9"])) == []  # free
    warned = reconcile_resume(saved, saved.with_overrides(["seed=8", "gradient_accumulation_steps=2"]))
    assert [(w.id, w.args["name"]) for w in warned] == [("resume.changed", "gradient_accumulation_steps"),
                                                        ("resume.changed", "seed")]
    changes = {"model_name_or_path": "other", "method": "full", "quantization_bits": 8, "lora_r": 4, "lora_alpha": 8,
               "lora_target": ["q_proj"], "use_rslora": True, "use_dora": True, "stage": "dpo", "init_adapter": "x",
               "chat_template": "chatml"}
    assert set(changes) == set(fields_with(RunConfig, "resume", MUST_MATCH))
    for name, value in changes.items():
        base = RunConfig(method="qlora") if name == "quantization_bits" else saved
        changed = RunConfig.from_dict({**base.to_dict(), name: value})
        with pytest.raises(ConfigError, match="Cannot resume with a different model") as refused:
            reconcile_resume(base, changed)
        assert f"{name} {getattr(base, name)!r} -> {value!r}" in str(refused.value)
    # A field added with a policy is reconciled by it, with no list to update.
    plus = _with(("new_knob", int, _f(1, "A new setting.", form="advanced", trainer=APP, resume=WARN,
                                      bounds=Bounds())))
    assert [w.args["name"] for w in reconcile_resume(plus(), plus(new_knob=2))] == ["new_knob"]


def test_trainer_arguments_are_built_from_the_metadata(tmp_path):
    from transformers import TrainingArguments

    known = {f.name for f in dataclasses.fields(TrainingArguments)}
    ways = {f.name: f.metadata["trainer"] for f in dataclasses.fields(RunConfig)}
    assert set(CONVERTERS) == {name for name, way in ways.items() if way.way == CONVERTED}
    values = argument_values(RunConfig(), tmp_path, _facts("fp32", has_eval=True, on_cpu=True, checkpointing=False))
    for name, way in ways.items():
        assert set(way.names) <= known, f"{name}: {way.names} are not all TrainingArguments fields"
        if way.way == COPIED:
            assert all(values[arg] == getattr(RunConfig(), name) for arg in way.names), name
        if way.way == CONVERTED:
            assert set(CONVERTERS[name](RunConfig(), _facts())) == set(way.names), name
    # A field declared once, copied under its TrainingArguments name, reaches the Trainer.
    plus = _with(("adam_beta2", float, _f(0.95, "AdamW beta2.", form="advanced", trainer=copied("adam_beta2"),
                                          resume=WARN, bounds=Bounds(low=0.0, high=1.0, high_open=True,
                                                                     message="config.share"))))
    values = argument_values(plus(), tmp_path, _facts("fp32", has_eval=False, on_cpu=True, checkpointing=False))
    assert values["adam_beta2"] == 0.95 and TrainingArguments(**values).adam_beta2 == 0.95


def _facts(precision: str = "bf16", has_eval: bool = True, on_cpu: bool = False, checkpointing: bool = True):
    from backend.training.arguments import RunFacts

    return RunFacts(precision, has_eval=has_eval, on_cpu=on_cpu, world_size=1, checkpointing=checkpointing)


def _number_fields() -> list[dataclasses.Field]:
    hints = get_type_hints(RunConfig)
    return [f for f in dataclasses.fields(RunConfig) if hint_is_number(hints[f.name]) and not f.metadata.get("choices")
            and f.metadata["form"] in FORM_GROUPS]


@pytest.fixture(scope="module")
def widgets(tmp_path_factory):
    from backend.runs.workspace import Workspace

    texts = merge_texts(train.TEXT)
    ctx = UIContext(workspace=Workspace(tmp_path_factory.mktemp("ws")), texts=texts, i18n=build_i18n(texts))
    built = {}
    with gr.Blocks():
        for specs in forms.SECTIONS.values():
            built |= forms.build_inputs(ctx, specs, RunConfig())
    return built


def test_form_widgets_have_the_bounds_validate_checks(widgets):
    """Every number in the form: the widget's limits are the field's bounds, and at each end the
    widget and RunConfig agree (an open end passes the widget and RunConfig says why it is refused)."""
    checked = 0
    for f in _number_fields():
        bounds, widget = f.metadata["bounds"], widgets[f.name]
        if isinstance(widget, gr.Textbox):  # an optional number: empty or typed text, RunConfig checks it
            assert f.name in forms.OPTIONAL_NUMBERS and bounds.high is None, f.name
            values = dict(zip(forms.NAMES, forms.form_values(RunConfig())), **{f.name: f"{min(bounds.low - 1, -1):g}"})  # a typed 0 is empty
            with pytest.raises(ConfigError, match=f.name):
                forms.config_from_values(list(values.values()), "demo", "demo")
            continue
        assert (widget.minimum, widget.maximum) == (bounds.low, bounds.high), f.name
        base = ["stage=dpo"] if bounds.preference_only else []
        for end, is_open, outward in ((bounds.low, bounds.low_open, -1), (bounds.high, bounds.high_open, 1)):
            if end is None:
                continue
            widget.preprocess(end)  # the widget lets its own end through
            if is_open:
                with pytest.raises(ConfigError):
                    RunConfig().with_overrides([*base, f"{f.name}={end}"])
            else:
                assert getattr(RunConfig().with_overrides([*base, f"{f.name}={end}"]), f.name) == end
            beyond = end + outward * (bounds.step or 1)
            with pytest.raises(gr.Error):
                widget.preprocess(beyond)
            with pytest.raises(ConfigError) as refused:
                RunConfig().with_overrides([*base, f"{f.name}={beyond}"])
            assert isinstance(refused.value.catalogued, Message), f.name
            checked += 1
    assert checked >= 30


def test_a_value_a_yaml_file_may_hold_fits_the_form(widgets):
    """A large but valid setting (a rank or cutoff above the old slider ends) loads into the form,
    and the form hands it back unchanged."""
    config = RunConfig(lora_r=512, lora_alpha=1024, cutoff_len=131072, per_device_train_batch_size=512,
                       gradient_accumulation_steps=1024, num_train_epochs=500, max_steps=5_000_000, seed=4_000_000_000)
    values = [widgets[name].preprocess(value) if name in widgets and isinstance(widgets[name], (gr.Number, gr.Slider))
              else value for name, value in zip(forms.NAMES, forms.form_values(config))]
    assert forms.config_from_values(values, config.model_name_or_path, config.dataset) == config


def test_a_new_field_takes_its_place_in_the_form():
    plus = _with(("adam_beta2", float, _f(0.95, "AdamW beta2.", form="advanced", trainer=copied("adam_beta2"),
                                          resume=WARN, bounds=Bounds(low=0.0, high=1.0, high_open=True,
                                                                     message="config.share", step=0.01))))
    advanced = forms.form_specs(plus)["advanced"]
    assert forms.FieldSpec("adam_beta2", "number", 0.0, 1.0, 0.01) in advanced
    assert [s for s in advanced if s.name != "adam_beta2"] == forms.ADVANCED_FIELDS


def test_the_form_sections_are_the_metadata_groups():
    for f in dataclasses.fields(RunConfig):
        group = f.metadata["form"]
        name = forms.JOINED.get(f.name, f.name)
        if group in FORM_GROUPS:
            assert name in [s.name for s in forms.SECTIONS[group]], f.name
        else:
            assert name not in forms.NAMES, f.name
