"""The policy each RunConfig field carries in its metadata, beside its help text.

Every field says, where it is declared in backend/config.py:

* bounds:  the numbers it accepts (Bounds) or its `choices`. `RunConfig.validate`
           refuses a value outside them and the Train form's widget is built with
           the same limits, so the form never refuses what a YAML file may hold.
* form:    the section of the Train form it sits in (FORM_GROUPS), or why it has
           no widget of its own (PICKER, FILE_ONLY).
* trainer: how it reaches the Trainer (ToTrainer): copied into TrainingArguments
           under a name, converted by backend/training/arguments.py, handed to
           TRL's preference config, to the sharding engine, or used by the app.
* resume:  what a resume with a changed value does: refuse it, warn, or allow it.

A few fields also carry `runs_code`: their value makes this machine run code someone
chose (`code_fields` below). An app reachable from other computers takes them only from
the person at this machine (docs/CONTRACTS.md, "Security defaults").

`policy_gaps` names any field that lacks one of these; the import of
backend.config fails on a gap, and tests/test_config.py checks the rule.

`ConfigError`, the error a refused setting raises, lives here too, below
backend/config.py, so the packages config.py builds on can raise it.
"""

from __future__ import annotations

import dataclasses
import math
import string
from dataclasses import dataclass
from typing import Any, get_type_hints

from backend.messages import CATALOGUE, UserError, msg


class ConfigError(UserError, ValueError):
    """An invalid run configuration; the message is meant for the user (a catalogued Message)."""


@dataclass(frozen=True)
class Bounds:
    """The numbers a field accepts. `message`: the catalogued sentence (backend/messages.py)
    for a value outside; it may name {name}/{names}, {value}, {low} and {high}."""
    low: float | None = None
    high: float | None = None
    low_open: bool = False   # the value must be above `low`, not equal to it
    high_open: bool = False  # the value must be below `high`
    message: str = ""
    step: float | None = None  # the form's increment
    preference_only: bool = False  # checked for a preference stage only (sft ignores the field)
    joint: bool = False  # checked by the rule that also reads the field it depends on (node_rank < nnodes)

    def contains(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)


ANY_NUMBER = Bounds()


def above(low: float, message: str = "config.above_zero", **kw: Any) -> Bounds:
    return Bounds(low=low, low_open=True, message=message, **kw)


def at_least(low: float, message: str, **kw: Any) -> Bounds:
    return Bounds(low=low, message=message, **kw)


def share(message: str = "config.share", high: float = 1.0, **kw: Any) -> Bounds:
    """A share in [0, high)."""
    return Bounds(low=0.0, high=high, high_open=True, message=message, **kw)


def between(low: float, high: float, message: str = "config.range", **kw: Any) -> Bounds:
    return Bounds(low=low, high=high, message=message, **kw)


def message_args(template: str, name: str, value: Any, bounds: Bounds) -> dict:
    """The arguments `template` names, from the field that broke its bounds."""
    wanted = {part[1] for part in string.Formatter().parse(template) if part[1]}
    given = {"name": name, "names": name, "value": value, "low": bounds.low, "high": bounds.high}
    return {key: given[key] for key in wanted if key in given}


# --- the form ---------------------------------------------------------------------------------
# Sections of the Train form, in page order (ui/forms.py builds each from its fields).
FORM_GROUPS = ("model", "data", "method", "lora", "training", "preference", "advanced", "scale")
PICKER = "picker"        # the tab's own model / dataset dropdown above the form (presets, saved datasets)
FILE_ONLY = "file_only"  # YAML and --set only: Python references the form has no widget for
FORM_PLACES = (*FORM_GROUPS, PICKER, FILE_ONLY)


def form_fields(cls: type) -> list[str]:
    """The fields the Train tab sets (a widget of the form, or its model / dataset picker), in order."""
    return [f.name for f in dataclasses.fields(cls) if f.metadata.get("form") in (*FORM_GROUPS, PICKER)]


# --- code -------------------------------------------------------------------------------------
# metadata["runs_code"] True: the value names Python this machine imports and calls (callbacks,
# loss_function, reward_functions), or lets a model's own code run (trust_remote_code).
RUNS_CODE = "runs_code"


def code_fields(cls: type) -> list[str]:
    return fields_with(cls, RUNS_CODE, True)


def code_settings(config: Any) -> list[str]:
    """The code fields `config` sets (a name, a list of names, or True), in declaration order."""
    return [name for name in code_fields(type(config)) if getattr(config, name)]


def refuse_code_settings(config: Any) -> None:
    """ConfigError naming the settings of `config` that would run code on this machine: what an app
    reachable from other computers says to a browser that sets them (none set: nothing happens)."""
    named = code_settings(config)
    if named:
        raise ConfigError(msg("config.code_remote", names=", ".join(named)))


# --- the Trainer ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToTrainer:
    """How a field reaches the Trainer; `names`: the TrainingArguments keywords it sets."""
    way: str
    names: tuple[str, ...] = ()


COPIED = "copied"          # the value, unchanged, under `names`
CONVERTED = "converted"    # turned into `names` by backend/training/arguments.py (CONVERTERS)
WAYS = (COPIED, CONVERTED, "preference", "scale", "app")


def copied(*names: str) -> ToTrainer:
    return ToTrainer(COPIED, names)


def converted(*names: str) -> ToTrainer:
    return ToTrainer(CONVERTED, names)


PREFERENCE = ToTrainer("preference")  # TRL's DPO/KTO/ORPO/CPO config (backend/training/preference.py)
SCALE = ToTrainer("scale")            # fsdp / deepspeed arguments (backend/scale/engines.py)
APP = ToTrainer("app")                # used by the app itself: model, data, adapters, launch, callbacks


# --- resume -----------------------------------------------------------------------------------
MUST_MATCH = "must_match"  # a change would load the checkpoint into another model or adapter: refused
WARN = "warn"              # allowed, but the run is then not the same run any more: logged
FREE = "free"
RESUME_POLICIES = (MUST_MATCH, WARN, FREE)


def fields_with(cls: type, key: str, value: Any) -> list[str]:
    """Names of the fields of `cls` whose metadata[key] is `value`, in declaration order."""
    return [f.name for f in dataclasses.fields(cls) if f.metadata.get(key) == value]


def hint_is_number(hint: Any) -> bool:
    """True for a type hint of int or float (Optional included), bool excepted."""
    args = getattr(hint, "__args__", None) or (hint,)
    return any(a in (int, float) for a in args) and bool not in args


def policy_gaps(cls: type) -> list[str]:
    """One sentence per field of `cls` that lacks part of its policy (empty: complete)."""
    hints = get_type_hints(cls)
    gaps = []
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if meta.get("form") not in FORM_PLACES:
            gaps.append(f"{f.name}: form should be one of {', '.join(FORM_PLACES)} (got {meta.get('form')!r})")
        way = meta.get("trainer")
        if not isinstance(way, ToTrainer) or way.way not in WAYS or (way.way in (COPIED, CONVERTED)) != bool(way.names):
            gaps.append(f"{f.name}: trainer should be copied(NAME), converted(NAME), PREFERENCE, SCALE or APP "
                        f"(got {way!r})")
        if meta.get("resume") not in RESUME_POLICIES:
            gaps.append(f"{f.name}: resume should be one of {', '.join(RESUME_POLICIES)} (got {meta.get('resume')!r})")
        bounds = meta.get("bounds")
        if hint_is_number(hints[f.name]) and not meta.get("choices") and not isinstance(bounds, Bounds):
            gaps.append(f"{f.name}: a number needs bounds (Bounds(...), or ANY_NUMBER when every number is fine)")
        limited = isinstance(bounds, Bounds) and (bounds.low is not None or bounds.high is not None)
        if limited and bounds.message not in CATALOGUE:
            gaps.append(f"{f.name}: its bounds need the id of a message in backend/messages.py (got {bounds.message!r})")
        if isinstance(bounds, Bounds) and isinstance(f.default, (int, float)) and math.isfinite(f.default) \
                and not bounds.contains(f.default):
            gaps.append(f"{f.name}: the default {f.default} is outside its own bounds")
    return gaps
