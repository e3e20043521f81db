"""grpo's rewards: the presets a user ticks and weights, and the user's own functions.

Every reward is a function with TRL's signature, `f(prompts, completions, **kwargs)
-> list[float]`, named after what it scores: TRL logs each under its `__name__`
(`rewards/<name>/mean`) and weights them with `reward_weights`. The data's
reference answer reaches them as the `answer` keyword (a column of the prompt
rows, backend/training/grpo_data.py).

Presets (RunConfig.rewards, each `{"kind": ..., "weight": ..., ...}`):
* exact_match: 1 when the answer equals the reference (the text inside the last
  <answer>...</answer> when there is one, else the last number where the
  reference is a number, else the whole completion; case, spaces and number
  spelling such as 1,000 / 1000.0 normalised);
* format: 1 when the whole completion matches `pattern` (a regex; default
  <think>...</think><answer>...</answer>); it also logs `format_share`;
* length: 1 when the completion has `min`..`max` tokens (either may be left
  out), falling linearly to 0 at twice the distance of the range's bound;
* contains / not_contains: 1 when `text` is (is not) in the completion.
"""

from __future__ import annotations

import math
import numbers  # numpy's floats are numbers.Real too: TRL takes them
import re
from collections.abc import Callable
from typing import Any

from backend.config_grpo import THINK_ANSWER
from backend.config_policy import ConfigError
from backend.messages import msg

ANSWER_COLUMN = "answer"  # the reference answer, a column of the prompt rows
NEEDS_REFERENCE = ("exact_match",)
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


# --- settings ---------------------------------------------------------------------------------

def reward_names(config) -> list[str]:
    """The name each reward is logged under, in order: presets (a kind that repeats gets _2, _3 ...),
    then the user's functions (their `__name__`, the part after ':')."""
    names, seen = [], {}
    for preset in config.rewards:
        kind = preset["kind"]
        seen[kind] = seen.get(kind, 0) + 1
        names.append(kind if seen[kind] == 1 else f"{kind}_{seen[kind]}")
    return names + [ref.partition(":")[2] for ref in config.reward_functions]


def needs_reference(config) -> list[str]:
    """The presets that compare against the data's reference answer."""
    return [name for name, preset in zip(reward_names(config), config.rewards) if preset["kind"] in NEEDS_REFERENCE]


# --- the reward functions ---------------------------------------------------------------------

def completion_text(completion: Any) -> str:
    """A completion as TRL hands it over: text, or (conversational data) a list of messages."""
    if isinstance(completion, list):
        return "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict))
    return str(completion)


def normalise(text: str) -> str:
    """An answer as compared: stripped, spaces collapsed, case folded, a number in one spelling."""
    text = " ".join(str(text).split()).casefold().rstrip(".")
    plain = text.replace(",", "")
    try:
        number = float(plain)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else repr(number)


def extract_answer(text: str, reference: str | None = None) -> str:
    tagged = ANSWER_TAG.findall(text)
    if tagged:
        return tagged[-1]
    if reference is not None and NUMBER.fullmatch(normalise(reference)):
        numbers = NUMBER.findall(text)
        return numbers[-1] if numbers else text
    return text


def exact_match_reward(prompts, completions, answer=None, **kwargs) -> list[float]:
    if answer is None:
        return [0.0] * len(completions)
    out = []
    for completion, reference in zip(completions, answer):
        text = completion_text(completion)
        if reference is None or not str(reference).strip():
            out.append(0.0)  # a prompt without a reference: nothing to match
            continue
        out.append(float(normalise(extract_answer(text, str(reference))) == normalise(str(reference))))
    return out


def _named(function: Callable, name: str) -> Callable:
    function.__name__ = function.__qualname__ = name
    return function


def build_preset(preset: dict, name: str, count_tokens: Callable[[str], int]) -> Callable:
    """The TRL reward function for one preset, named `name`."""
    kind = preset["kind"]
    if kind == "exact_match":
        def reward(prompts, completions, **kwargs):
            return exact_match_reward(prompts, completions, kwargs.get(ANSWER_COLUMN))
    elif kind == "format":
        pattern = re.compile(str(preset.get("pattern") or THINK_ANSWER), re.DOTALL)

        def reward(prompts, completions, **kwargs):
            hits = [float(pattern.fullmatch(completion_text(c).strip()) is not None) for c in completions]
            if callable(kwargs.get("log_metric")) and hits:
                kwargs["log_metric"]("format_share", sum(hits) / len(hits))
            return hits
    elif kind == "length":
        low, high = preset.get("min"), preset.get("max")

        def reward(prompts, completions, **kwargs):
            ids = kwargs.get("completion_ids")
            lengths = [len(i) for i in ids] if ids is not None else [count_tokens(completion_text(c)) for c in completions]
            return [length_score(n, low, high) for n in lengths]
    else:
        text, wanted = str(preset["text"]), kind == "contains"

        def reward(prompts, completions, **kwargs):
            return [float((text in completion_text(c)) == wanted) for c in completions]
    return _named(reward, name)


def length_score(tokens: int, low: int | None, high: int | None) -> float:
    if low is not None and tokens < low:
        return max(0.0, 1.0 - (low - tokens) / max(low, 1))
    if high is not None and tokens > high:
        return max(0.0, 1.0 - (tokens - high) / max(high, 1))
    return 1.0


def reward_functions(config, count_tokens: Callable[[str], int]) -> tuple[list[Callable], list[float]]:
    """(functions, weights) for TRL's GRPOTrainer: the presets, then the user's functions."""
    from backend.config import import_reference

    names = reward_names(config)
    functions = [build_preset(p, n, count_tokens) for p, n in zip(config.rewards, names)]
    weights = [float(p.get("weight", 1.0)) for p in config.rewards]
    functions += [import_reference(ref) for ref in config.reward_functions]
    weights += list(config.reward_weights) or [1.0] * len(config.reward_functions)
    return functions, weights


def check_user_functions(config) -> None:
    """Each `reward_functions` entry imported and called once on a fake completion, before any
    model loads: it must take TRL's arguments and give one finite number (or None) per completion."""
    from backend.config import import_reference

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
