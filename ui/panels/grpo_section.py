"""The Train tab's GRPO section: TRL's sampling settings and the rewards, shown
only while the stage is grpo.

It places RunConfig's grpo-only fields (through ui/forms.py, as every other
section) and the reward widgets whose values ui/grpo_form.py turns into
`rewards`, `reward_functions` and `reward_weights`. The components it returns
join the form's value list under ui/forms.py's NAMES.
"""

from __future__ import annotations

from typing import Any

from backend.config import RunConfig
from backend.config_grpo import REWARD_KINDS
from ui import forms, grpo_form
from ui.context import UIContext


def preference_specs() -> list[forms.FieldSpec]:
    """The preference section without the fields the GRPO section shows."""
    return [s for s in forms.PREFERENCE_FIELDS if s.name not in grpo_form.GRPO_FIELDS]


def grpo_specs() -> list[forms.FieldSpec]:
    return [s for s in forms.ALL_FIELDS if s.name in grpo_form.GRPO_FIELDS]


def visible(stage: str | None) -> bool:
    return stage == "grpo"


def kept_note(ctx: UIContext, lang: str | None, kept: list | None) -> str:
    return ctx.msg(lang, "train.grpo.kept", count=len(kept)) if kept else ""


def build(ctx: UIContext, defaults: RunConfig) -> tuple[Any, dict[str, Any]]:
    """(the section's accordion, {name: component}) for the GRPO settings and rewards."""
    import gradio as gr

    t, values = ctx.t, grpo_form.form_values(defaults)
    components: dict[str, Any] = {}

    def box(name: str, **kw):
        return gr.Textbox(value=values[name], label=t(f"train.field.{name}"), info=t(f"train.help.{name}"),
                          elem_id=f"train-{name.replace('_', '-')}", **kw)

    with gr.Accordion(t("train.section.grpo"), open=True, visible=visible(defaults.stage),
                      elem_id="train-section-grpo") as section:
        with gr.Row():
            components |= forms.build_inputs(ctx, grpo_specs(), defaults)
        gr.Markdown(t("train.grpo.rewards"))
        for kind in REWARD_KINDS:
            with gr.Row(equal_height=True):
                on, weight = f"reward_{kind}_on", f"reward_{kind}_weight"
                components[on] = gr.Checkbox(value=values[on], label=t(f"train.field.{on}"),
                                             info=t(f"train.help.{on}"), scale=2, elem_id=f"train-reward-{kind}")
                components[weight] = gr.Number(value=values[weight], step=0.1, label=t(f"train.field.{weight}"),
                                               scale=1, elem_id=f"train-reward-{kind}-weight")
                for param in grpo_form.PARAMS.get(kind, ()):
                    name = f"reward_{kind}_{param}"
                    components[name] = box(name, scale=2)
        components["reward_functions_text"] = box("reward_functions_text", lines=2, placeholder="my_rewards:polite 0.5")
        components[grpo_form.KEPT] = gr.State(values[grpo_form.KEPT])
        note = gr.Markdown(elem_id="train-grpo-kept")
    components[grpo_form.KEPT].change(lambda lang, kept: kept_note(ctx, lang, kept), [ctx.lang, components[grpo_form.KEPT]],
                                      note, api_visibility="private")
    return section, components
