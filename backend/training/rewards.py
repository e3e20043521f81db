"""grpo's rewards: the presets a user ticks and weights, and the user's own functions.

Every reward is a function with TRL's signature, `f(prompts, completions, **kwargs)
-> list[float]`, named after what it scores: TRL logs each under its `__name__`
(`rewards/<name>/mean`) and weights them with `reward_weights`. The data's
reference answer reaches them as the `answer` keyword (a column of the prompt
rows, backend/training/grpo_data.py).

Presets (RunConfig.rewards, each `{"kind": ..., "weight": ..., ...}`) are scorer
specs of backend/scoring/ with a weight; the reward of a completion is the
scorer's value:
* exact_match: 1 when the answer equals the reference (the text inside the last
  <answer>...</answer> when there is one, else the last number where the
  reference is a number, else the whole completion; case, spaces and number
  spelling such as 1,000 / 1000.0 normalised);
* format: 1 when the whole completion matches `pattern` (a regex; default
  <think>...</think><answer>...</answer>); it also logs `format_share`;
* length: 1 when the completion has `min`..`max` tokens (either may be left
  out), falling linearly to 0 at twice the distance of the range's bound;
* contains / not_contains: 1 when `text` is (is not) in the completion;
* rouge_l: the ROUGE-L F-measure (0-1) against the reference, partial credit that tells two
  wrong completions apart (backend/scoring/overlap.py).
"""

from __future__ import annotations

import math
import numbers  # numpy's floats are numbers.Real too: TRL takes them
from collections.abc import Callable
from typing import Any

from backend.config import import_reference
from backend.config_policy import ConfigError
from backend.messages import msg
from backend.scoring.items import Item, Scorer
from backend.scoring.scorer_specs import parse_scorer, scorer_names

ANSWER_COLUMN = "answer"  # the reference answer, a column of the prompt rows


# --- settings ---------------------------------------------------------------------------------

def reward_names(config) -> list[str]:
    """The name each reward is logged under, in order: presets (a kind that repeats gets _2, _3 ...),
    then the user's functions (their `__name__`, the part after ':')."""
    names = scorer_names([{"kind": preset["kind"]} for preset in config.rewards])
    return names + [ref.partition(":")[2] for ref in config.reward_functions]


def preset_scorer(preset: dict, name: str) -> Scorer:
    """The scorer behind a preset: its spec without the weight."""
    return parse_scorer({k: v for k, v in preset.items() if k != "weight"}, name=name)


def needs_reference(config) -> list[str]:
    """The presets that compare against the data's reference answer."""
    return [name for name, preset in zip(reward_names(config), config.rewards)
            if preset_scorer(preset, name).needs_reference]


# --- the reward functions ---------------------------------------------------------------------

def completion_text(completion: Any) -> str:
    """A completion as TRL hands it over: text, or (conversational data) a list of messages."""
    if isinstance(completion, list):
        return "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict))
    return str(completion)


def _named(function: Callable, name: str) -> Callable:
    function.__name__ = function.__qualname__ = name
    return function


def build_preset(preset: dict, name: str, count_tokens: Callable[[str], int]) -> Callable:
    """The TRL reward function for one preset, named `name`: the scorer's value per completion
    (a completion's length in tokens from TRL's completion ids, else `count_tokens`)."""
    scorer = preset_scorer(preset, name)

    def reward(prompts, completions, **kwargs):
        references = kwargs.get(ANSWER_COLUMN)
        if scorer.needs_reference and references is None:
            return [0.0] * len(completions)
        ids = kwargs.get("completion_ids")
        values = []
        for i, completion in enumerate(completions):
            reference = references[i] if references is not None else None
            item = Item(completion_text(completion), None if reference is None else str(reference),
                        tokens=len(ids[i]) if ids is not None else None, count_tokens=count_tokens)
            values.append(scorer.score(item).value)
        if scorer.kind == "format" and callable(kwargs.get("log_metric")) and values:
            kwargs["log_metric"]("format_share", sum(values) / len(values))
        return values
    return _named(reward, name)


def exact_match_reward(prompts, completions, answer=None, **kwargs) -> list[float]:
    """The exact_match preset as a plain function (bench/ and the tests call it)."""
    return build_preset({"kind": "exact_match"}, "exact_match", len)(prompts, completions, answer=answer)


def reward_functions(config, count_tokens: Callable[[str], int]) -> tuple[list[Callable], list[float]]:
    """(functions, weights) for TRL's GRPOTrainer: the presets, then the user's functions."""

    names = reward_names(config)
    functions = [build_preset(p, n, count_tokens) for p, n in zip(config.rewards, names)]
    weights = [float(p.get("weight", 1.0)) for p in config.rewards]
    functions += [import_reference(ref) for ref in config.reward_functions]
    weights += list(config.reward_weights) or [1.0] * len(config.reward_functions)
    return functions, weights


def check_user_functions(config) -> None:
    """Each `reward_functions` entry imported and called once on a fake completion, before any
    model loads: it must take TRL's arguments and give one finite number (or None) per completion."""

    prompts = [[{"role": "user", "content": "What is 2 + 3?"}]] * 2
    completions = [[{"role": "assistant", "content": "<think>2 + 3 = 5</think><answer>5</answer>"}],
                   [{"role": "assistant", "content": "5"}]]
    for ref in config.reward_functions:
        function = import_reference(ref)
        if not callable(function) or isinstance(function, type):
            raise ConfigError(msg("config.reward_not_function", ref=ref, kind=type(function).__name__))
        try:
            values = function(prompts=prompts, completions=completions, answer=["5", "5"],
                              completion_ids=[[1, 2], [3]], trainer_state=None,
                              log_extra=lambda *a, **k: None, log_metric=lambda *a, **k: None)
        except Exception as error:  # the user's code: any failure is theirs to fix, said in one sentence
            raise ConfigError(msg("config.reward_call", ref=ref, error=f"{type(error).__name__}: {error}")) from None
        if not isinstance(values, (list, tuple)) or len(values) != len(completions) or not all(
                v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v))
                for v in values):
            raise ConfigError(msg("config.reward_result", ref=ref, got=repr(values)[:120], n=len(completions)))
