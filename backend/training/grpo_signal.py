"""A grpo run that learns nothing says so.

GRPO learns only from differences inside a group: each completion's advantage is its reward minus
its group's mean. When every group of a step scores alike (TRL logs `frac_reward_zero_std` 1.0,
the share of groups whose rewards have no spread), every advantage is 0, and so are the loss and
grad_norm (the KL term is 0 too while the adapter is still the reference): the step trains
nothing, and the run would end `completed` all the same. After NO_SIGNAL_STEPS such steps in a
row the worker writes one warning to train.log and to status.json (`train_warning`, a catalogued
message the Runs tab shows in the user's language), naming what to change.

A tiny model often starts so: no completion of a group overlaps the reference until one does by
chance (docs/PREFERENCE.md's quick command had steps 3-7 alike, then a reward that rose to 0.35).
Once NO_SIGNAL_STEPS steps since the warning have had a spread again, in a row or not, the warning
is withdrawn (a line in train.log; status.json's `train_warning` cleared), and a later streak warns
again: the status says what holds at the run's end, train.log what happened on the way.
"""

from __future__ import annotations

import logging
from pathlib import Path

from transformers import TrainerCallback

from backend.messages import msg
from backend.runs.files import update_status

log = logging.getLogger("backend.train")

# Steps in a row. A run that learns has such steps now and then (bench/grpo_sums.py, docs/PREFERENCE.md:
# 10 of 29 steps, as the sampling grew surer); a run whose rewards never differ has them all.
NO_SIGNAL_STEPS = 5
ALIKE = 0.999  # frac_reward_zero_std at or above this: every group alike (TRL averages it over the logged steps)


class GroupSignalCheck(TrainerCallback):
    """Counts the optimizer steps in a row whose groups all scored alike; warns once at NO_SIGNAL_STEPS."""

    def __init__(self, run_dir: Path | None, num_generations: int, steps: int = NO_SIGNAL_STEPS):
        self.run_dir = Path(run_dir) if run_dir is not None else None  # None: not the main process
        self.num_generations = num_generations
        self.steps = steps
        self.first: int | None = None  # first step of the current streak
        self.last_logged = 0
        self.warning = None
        self.spread_since_warning = 0  # steps with a spread since the warning

    def on_train_begin(self, args, state, control, **kwargs):
        self.last_logged = state.global_step  # a resumed run counts from its checkpoint

    def on_log(self, args, state, control, logs=None, **kwargs):
        share = (logs or {}).get("frac_reward_zero_std")
        if not isinstance(share, (int, float)) or "loss" not in logs:
            return control
        if share >= ALIKE:
            self.first = self.last_logged + 1 if self.first is None else self.first
        else:
            self.first = None
            if self.warning is not None:
                self.spread_since_warning += state.global_step - self.last_logged
        self.last_logged = state.global_step
        if self.first is not None and self.warning is None and state.global_step - self.first + 1 >= self.steps:
            self._warn(state, logs)
        elif self.warning is not None and self.spread_since_warning >= self.steps:
            self._withdraw(state, logs)
        return control

    def _warn(self, state, logs: dict) -> None:
        self.warning = msg("train.grpo_no_signal", first=self.first, last=state.global_step,
                           generations=self.num_generations, reward=round(float(logs.get("reward") or 0.0), 3))
        log.warning("%s", self.warning)
        if self.run_dir is not None and state.is_world_process_zero:
            update_status(self.run_dir, train_warning=self.warning.to_dict())

    def _withdraw(self, state, logs: dict) -> None:
        log.info("%s", msg("train.grpo_signal_back", steps=self.spread_since_warning, last=state.global_step,
                           warned=f"{self.warning.args['first']}-{self.warning.args['last']}",
                           reward=round(float(logs.get("reward") or 0.0), 3)))
        self.warning, self.spread_since_warning = None, 0
        if self.run_dir is not None and state.is_world_process_zero:
            update_status(self.run_dir, train_warning=None)
