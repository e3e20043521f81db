"""What a grpo RunConfig must hold, checked when it is validated (RunConfig.validate), before any
model loads: the reward presets, the user's reward functions and their weights, and the batch rule.

Rewards (RunConfig.rewards, each `{"kind": ..., "weight": ..., ...}`; backend/training/rewards.py
scores them): a scorer spec of backend/scoring/ of a kind in REWARD_KINDS, checked by the scorer
library (its keys, a pattern that compiles, a length range, a text), with a finite weight;
`reward_functions` named as module:function, with one weight each when weights are given.

The batch rule: TRL's GRPOTrainer counts completions, not prompts, in a batch.
A generation batch (per_device_train_batch_size x processes x
gradient_accumulation_steps completions) must hold whole groups of
`num_generations` completions of one prompt, else TRL stops with
"generation_batch_size must be divisible by num_generations" after the model
has loaded. This module says it before, naming the numbers and the nearest
values that work, and gives the Plan its counts.
"""

from __future__ import annotations

from backend.config_policy import ConfigError
from backend.messages import msg
from backend.scoring.errors import ScorerError, is_finite_number
from backend.scoring.scorer_specs import parse_scorer
from backend.scoring.text_match import THINK_ANSWER  # noqa: F401 (the format preset's default, for the Train form)

# The presets the Train form ticks: scorer kinds of backend/scoring/ (a preset is a scorer spec with a weight).
# rouge_l gives partial credit (its F-measure against the reference, 0-1): a group differs before any answer is right.
REWARD_KINDS = ("exact_match", "format", "length", "contains", "not_contains", "rouge_l")


# --- rewards ----------------------------------------------------------------------------------

def check_reward_settings(config) -> None:
    """RunConfig.validate for stage grpo: what the settings alone tell (ConfigError, one sentence)."""
    if not config.rewards and not config.reward_functions:
        raise ConfigError(msg("config.grpo_no_reward"))
    for number, preset in enumerate(config.rewards, 1):
        _check_preset(number, preset)
    for ref in config.reward_functions:
        if ":" not in ref or not all(ref.split(":", 1)):
            raise ConfigError(msg("config.reference", ref=ref))
    if config.reward_weights and len(config.reward_weights) != len(config.reward_functions):
        raise ConfigError(msg("config.reward_weights", weights=len(config.reward_weights),
                              functions=len(config.reward_functions)))
    check_batch(config, config.num_processes or 1)


def _check_preset(number: int, preset: dict) -> None:
    """One preset: its kind, keys and fields as the scorer library checks them (one sentence naming
    the entry), then its weight, which only a reward has."""
    where = msg("config.reward_where", number=number)
    try:
        parse_scorer(preset, where, kinds=REWARD_KINDS, beside=("weight",))
    except ScorerError as error:
        raise ConfigError(error.catalogued or str(error)) from None
    weight = preset.get("weight", 1.0)
    if not is_finite_number(weight):
        raise ConfigError(msg("config.reward_weight", number=number, kind=preset["kind"], value=weight))


# --- the batch rule ---------------------------------------------------------------------------

def effective_batch(config, world_size: int) -> int:
    return config.per_device_train_batch_size * config.gradient_accumulation_steps * world_size


def prompts_per_step(config, world_size: int = 1) -> int:
    """Prompts whose groups make one optimizer step."""
    return max(1, effective_batch(config, world_size) // config.num_generations)


def check_batch(config, world_size: int) -> None:
    batch = effective_batch(config, world_size)
    generations = config.num_generations
    if batch % generations:
        raise ConfigError(msg("config.grpo_batch", generations=generations, batch=batch,
                              per_device=config.per_device_train_batch_size,
                              accumulation=config.gradient_accumulation_steps, processes=world_size,
                              generation_choices=_or(nearest_generations(batch, generations)),
                              batch_choices=_or(nearest_per_device(config, world_size))))
    if config.val_size > 0 and (config.per_device_eval_batch_size * world_size) % generations:
        raise ConfigError(msg("config.grpo_eval_batch", generations=generations,
                              eval_batch=config.per_device_eval_batch_size * world_size,
                              choices=_or(_multiples_near(config.per_device_eval_batch_size, generations, world_size))))


def nearest_generations(batch: int, generations: int) -> list[int]:
    """The divisors of `batch` (at least 2) just below and just above `generations`."""
    divisors = [d for d in range(2, batch + 1) if batch % d == 0]
    below = [d for d in divisors if d < generations]
    above = [d for d in divisors if d > generations]
    return [*below[-1:], *above[:1]]


def nearest_per_device(config, world_size: int) -> list[int]:
    """per_device_train_batch_size values just below and above the current one that hold whole groups."""
    step = config.gradient_accumulation_steps * world_size
    return _multiples_near(config.per_device_train_batch_size, config.num_generations, step)


def _multiples_near(current: int, generations: int, step: int) -> list[int]:
    fits = [n for n in range(1, current + 2 * generations + 1) if (n * step) % generations == 0]
    below = [n for n in fits if n < current]
    above = [n for n in fits if n > current]
    return [*below[-1:], *above[:1]]


def _or(values: list[int]) -> str:
    return " / ".join(str(v) for v in values)  # no word between them: the sentence is translated, the list is not
