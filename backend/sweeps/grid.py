"""A sweep file: a grid (or a list) over one to three RunConfig settings, a target and a budget.

    grid:                         # every combination: 3 x 2 = 6 runs
      learning_rate: [1e-4, 3e-4, 1e-3]
      lora_r: [8, 32]
    # runs:                       # or a list of combinations, each setting the same fields
    #   - {learning_rate: 1e-4, lora_r: 8}
    target: eval_loss             # what the best run is picked by (default eval_loss)
    direction: min                # min | max (default: min for losses and perplexity, else max)
    max_runs: 16                  # the budget: a bigger grid is refused, unless
    sample: 8                     # ... a random 8 of the grid are run instead
    seed: 0                       # ... picked with this seed

Every combination becomes a RunConfig through RunConfig's own validation before anything is
queued, so a refused value is said with RunConfig's own sentence and nothing starts.
"""

from __future__ import annotations

import difflib
import math
import random
from dataclasses import dataclass
from pathlib import Path

import yaml

from backend.config import RunConfig
from backend.config_policy import ConfigError, code_fields, form_fields
from backend.messages import UserError, message_of, msg

KEYS = ("grid", "runs", "target", "direction", "max_runs", "sample", "seed")
MAX_FIELDS = 3
DEFAULT_MAX_RUNS = 16
# Metrics a run records itself (summary.json), then those Evaluate computes (backend/evaluation/results.py:
# METRICS, the same names and directions; tests/test_sweeps.py checks the two agree). True: lower is better.
TARGETS = {"eval_loss": True, "train_loss": True, "perplexity": True, "bleu": False, "rouge1": False,
           "rouge2": False, "rougeL": False, "exact_match": False, "preference_accuracy": False,
           "mean_margin": False, "logp_accuracy": False,
           "judge_win_rate": False}  # the run's newest pairwise judgement (backend/judge/judgement_file.py)
# What a sweep may vary: exactly the settings the Train tab offers (its form and its model / dataset
# pickers), less those that run code (trust_remote_code): a sweep compares settings, never code.
# The runs take the rest from the base, YAML-only fields (callbacks, reward_functions ...) included.
FIELDS = tuple(name for name in form_fields(RunConfig) if name not in code_fields(RunConfig))


class SweepError(UserError, ValueError):
    """A sweep that cannot run as written; the message names what is wrong and what to do."""


@dataclass(frozen=True)
class Sweep:
    fields: tuple[str, ...]
    combinations: tuple[dict, ...]   # the runs, in order (after sampling)
    grid_size: int                   # combinations before sampling
    target: str = "eval_loss"
    direction: str = "min"
    max_runs: int = DEFAULT_MAX_RUNS
    sample: int | None = None
    seed: int = 0

    def as_dict(self) -> dict:
        return {"fields": list(self.fields), "combinations": [dict(c) for c in self.combinations],
                "grid_size": self.grid_size, "target": self.target, "direction": self.direction,
                "max_runs": self.max_runs, "sample": self.sample, "seed": self.seed}


def load_sweep(path: Path) -> Sweep:
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as error:
        raise SweepError(msg("sweep.file", path=path, error=getattr(error, "strerror", None) or error)) from None
    except yaml.YAMLError as error:
        raise SweepError(msg("sweep.file", path=path, error=error)) from None
    return parse_sweep(data)


def parse_sweep(data) -> Sweep:
    """The sweep of a YAML mapping (or the Train tab's values), every part checked; raises SweepError."""
    if not isinstance(data, dict):
        raise SweepError(msg("sweep.not_mapping"))
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise SweepError(msg("sweep.unknown_key", names=", ".join(repr(k) for k in unknown)))
    fields, pick = _grid(data)
    target = str(data.get("target") or "eval_loss")
    if target not in TARGETS:
        raise SweepError(msg("sweep.bad_target", target=target, known=", ".join(TARGETS)))
    direction = data.get("direction") or ("min" if TARGETS[target] else "max")
    if direction not in ("min", "max"):
        raise SweepError(msg("sweep.bad_direction", value=direction))
    max_runs = _whole(data, "max_runs", DEFAULT_MAX_RUNS)
    sample = _whole(data, "sample", None)
    seed = _whole(data, "seed", 0, minimum=0)
    grid_size = pick.size
    # Only the kept runs are ever built: a grid of 300 x 300 x 300 values is 27 million combinations.
    kept = min(sample, grid_size) if sample is not None else grid_size
    if kept > max_runs:  # a grid over the budget without a sample, or a sample bigger than the budget
        raise SweepError(msg("sweep.over_budget", count=kept, budget=max_runs))
    if kept < grid_size:
        indices = sorted(random.Random(seed).sample(range(grid_size), kept))
    else:
        indices = range(grid_size)
    combinations = [pick(i) for i in indices]
    return Sweep(fields=tuple(fields), combinations=tuple(combinations), grid_size=grid_size, target=target,
                 direction=direction, max_runs=max_runs, sample=sample, seed=seed)


@dataclass(frozen=True)
class _Pick:
    """The combinations of a grid (or a runs list) by index, without building them: index i is the
    i-th combination of itertools.product over the grid's values (the last field varies fastest)."""
    fields: tuple[str, ...]
    values: tuple[list, ...] = ()    # a grid: each field's values
    runs: tuple[dict, ...] = ()      # or a runs list, as given

    @property
    def size(self) -> int:
        return len(self.runs) if self.runs else math.prod(len(v) for v in self.values)

    def __call__(self, index: int) -> dict:
        if self.runs:
            return dict(self.runs[index])
        chosen = []
        for values in reversed(self.values):
            index, at = divmod(index, len(values))
            chosen.append(values[at])
        return dict(zip(self.fields, reversed(chosen)))


def _grid(data: dict) -> tuple[list[str], _Pick]:
    if data.get("runs") is not None:
        runs = data["runs"]
        if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
            raise SweepError(msg("sweep.not_list", name="runs", value=runs))
        if not runs:
            raise SweepError(msg("sweep.empty", name="runs"))
        fields = list(runs[0])
        for index, run in enumerate(runs, 1):
            if set(run) != set(fields):
                raise SweepError(msg("sweep.runs_mismatch", index=index, names=", ".join(run), first=", ".join(fields)))
        _check_fields(fields)
        return fields, _Pick(fields=tuple(fields), runs=tuple(runs))
    grid = data.get("grid")
    if not isinstance(grid, dict) or not grid:
        raise SweepError(msg("sweep.no_fields"))
    fields = list(grid)
    _check_fields(fields)
    for name, values in grid.items():
        if not isinstance(values, list):
            raise SweepError(msg("sweep.not_list", name=name, value=values))
        if not values:
            raise SweepError(msg("sweep.empty", name=name))
    return fields, _Pick(fields=tuple(fields), values=tuple(grid.values()))


def _check_fields(fields: list[str]) -> None:
    for name in fields:
        if name in RunConfig.__dataclass_fields__ and name not in FIELDS:
            raise SweepError(msg("sweep.not_swept", name=name))
        if name not in FIELDS:
            close = difflib.get_close_matches(str(name), FIELDS, n=1)
            raise SweepError(msg("sweep.unknown_field_close", name=name, close=close[0]) if close
                             else msg("sweep.unknown_field", name=name))
    if not fields:
        raise SweepError(msg("sweep.no_fields"))
    if len(fields) > MAX_FIELDS:
        raise SweepError(msg("sweep.too_many_fields", count=len(fields), names=", ".join(fields)))


def _whole(data: dict, name: str, default, minimum: int = 1):
    value = data.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SweepError(msg("sweep.bad_budget", name=name, value=value))
    return value


def sweep_configs(sweep: Sweep, base: RunConfig) -> list[RunConfig]:
    """One RunConfig per combination, each through RunConfig's validation (from_dict: types, bounds,
    combinations); the first refused one raises SweepError with RunConfig's own sentence."""
    configs = []
    for index, values in enumerate(sweep.combinations, 1):
        try:
            configs.append(RunConfig.from_dict({**base.to_dict(), **values}))
        except ConfigError as error:
            shown = ", ".join(f"{k}={v!r}" for k, v in values.items())
            raise SweepError(msg("sweep.bad_value", index=index, values=shown,
                                 error=message_of(error) or str(error))) from None
    return configs
