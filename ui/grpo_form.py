"""The Train form's GRPO rewards, and back: the widgets' values <-> RunConfig's
`rewards`, `reward_functions` and `reward_weights` (YAML-only fields, which
have no generic widget).

The form shows each preset kind once: a tick, a weight and its setting
(format: a regex; length: min / max completion tokens; contains / does not
contain: a text), and a box of your own functions, one `module:function
[weight]` a line. ui/forms.py appends NAMES to the form's value list, so
Start, the Plan, Show command, Save / Load YAML and a stage switch carry them
like any field. Presets a loaded file has that the form cannot show (a kind
twice) travel unchanged in `rewards_kept` while their kind stays ticked.
Values the form cannot read as numbers go to RunConfig as typed, which
refuses them with its own sentence. No gradio here.
"""

from __future__ import annotations

from typing import Any

from backend.config_grpo import REWARD_KINDS, THINK_ANSWER
from ui.texts.grpo_form_texts import FUNCTIONS, KIND_HELP, KIND_LABELS, PARAM_TEXT, TEXT, WEIGHT  # noqa: F401  (TEXT: read by the Train tab)

# RunConfig fields shown in the GRPO section instead of the preference section.
GRPO_FIELDS = ("num_generations", "max_completion_length", "temperature", "use_vllm")
PARAMS = {"format": ("pattern",), "length": ("min", "max"), "contains": ("text",), "not_contains": ("text",)}
NAMES = (*[n for kind in REWARD_KINDS for n in (f"reward_{kind}_on", f"reward_{kind}_weight",
                                                   *[f"reward_{kind}_{p}" for p in PARAMS.get(kind, ())])],
         "reward_functions_text", "rewards_kept")
KEPT = "rewards_kept"  # a gr.State, not a widget: no label


def _texts() -> tuple[dict, dict]:
    labels, helps = {}, {}
    for kind in REWARD_KINDS:
        labels[f"reward_{kind}_on"], helps[f"reward_{kind}_on"] = KIND_LABELS[kind], KIND_HELP[kind]
        labels[f"reward_{kind}_weight"], helps[f"reward_{kind}_weight"] = WEIGHT
    for name, (label, help_) in PARAM_TEXT.items():
        labels[f"reward_{name}"], helps[f"reward_{name}"] = label, help_
    labels["reward_functions_text"], helps["reward_functions_text"] = FUNCTIONS
    return labels, helps


LABELS, HELP = _texts()
assert set(LABELS) == set(NAMES) - {KEPT}, set(NAMES) ^ set(LABELS)
# The form's texts, merged into the Train tab's table by ui/forms.py.
FIELD_TEXT = {f"train.field.{n}": text for n, text in LABELS.items()}
HELP_TEXT = {f"train.help.{n}": text for n, text in HELP.items()}


# --- config -> form ------------------------------------------------------------------------------

def form_values(config) -> dict[str, Any]:
    """The GRPO widgets' values for `config` (a RunConfig)."""
    return widget_values(config.rewards, config.reward_functions, config.reward_weights)


def widget_values(rewards: list[dict], functions: list[str] = (), weights: list[float] = ()) -> dict[str, Any]:
    first: dict[str, dict] = {}
    kept: list[dict] = []
    for preset in rewards:
        if preset.get("kind") in first:
            kept.append(dict(preset))  # a kind twice: the form shows the first
        else:
            first[preset.get("kind")] = preset
    values: dict[str, Any] = {}
    for kind in REWARD_KINDS:
        preset = first.get(kind)
        values[f"reward_{kind}_on"] = preset is not None
        values[f"reward_{kind}_weight"] = float(preset.get("weight", 1.0)) if preset else 1.0
        for param in PARAMS.get(kind, ()):
            value = (preset or {}).get(param)
            if kind == "format":
                value = value or THINK_ANSWER
            values[f"reward_{kind}_{param}"] = "" if value is None else str(value)
    weights = list(weights)
    values["reward_functions_text"] = "\n".join(
        f"{ref} {weights[i]:g}" if i < len(weights) else ref for i, ref in enumerate(functions))
    values[KEPT] = kept
    return values


# --- form -> config ------------------------------------------------------------------------------

def _whole_number(text: Any) -> Any:
    """A min / max box: empty -> None; a whole number -> int; other text as typed (RunConfig refuses it)."""
    text = "" if text is None else str(text).strip()
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() else text


def _preset(kind: str, values: dict[str, Any]) -> dict:
    preset: dict[str, Any] = {"kind": kind}
    weight = values.get(f"reward_{kind}_weight")
    if weight is not None and weight != "":
        preset["weight"] = float(weight) if isinstance(weight, (int, float)) and not isinstance(weight, bool) else weight
    if kind == "format":
        pattern = str(values.get("reward_format_pattern") or "").strip()
        if pattern and pattern != THINK_ANSWER:  # the default needs no line in the YAML
            preset["pattern"] = pattern
    elif kind == "length":
        for param in ("min", "max"):
            number = _whole_number(values.get(f"reward_length_{param}"))
            if number is not None:
                preset[param] = number
    elif kind in ("contains", "not_contains"):
        preset["text"] = str(values.get(f"reward_{kind}_text") or "")
    return preset


def function_lines(text: str | None) -> tuple[list[str], list[Any]]:
    """(reward_functions, reward_weights) from the box: one 'module:function [weight]' a line; blank
    lines and '#' comments skipped. Weights only when a line gives one (then 1 for the others)."""
    refs, weights, given = [], [], False
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        ref, *rest = line.split(None, 1)  # any spaces or tabs between the name and its weight
        refs.append(ref)
        weight = rest[0].strip() if rest else ""
        given = given or bool(weight)
        weights.append(weight or 1.0)  # text RunConfig reads as a float, or refuses by name
    return refs, weights if given else []


def config_fields(values: dict[str, Any]) -> dict[str, Any]:
    """{rewards, reward_functions, reward_weights} from the widgets' values ({} when the form has none)."""
    if not any(name in values for name in NAMES):
        return {}
    ticked = [kind for kind in REWARD_KINDS if values.get(f"reward_{kind}_on")]
    kept = [dict(p) for p in (values.get(KEPT) or []) if isinstance(p, dict) and p.get("kind") in ticked]
    refs, weights = function_lines(values.get("reward_functions_text"))
    return {"rewards": [_preset(kind, values) for kind in ticked] + kept, "reward_functions": refs,
            "reward_weights": weights}


def with_rewards(values: dict[str, Any], rewards: list[dict]) -> dict[str, Any]:
    """`values` with the preset widgets showing `rewards` (a stage switch's defaults); the user's
    own functions stay as they are."""
    shown = widget_values(rewards)
    del shown["reward_functions_text"]
    return {**values, **shown}
