"""A plan no one meant: num_train_epochs=1e30 or max_steps=1e12 are valid
numbers, and the Trainer would start on them without a word. The worker says
how many optimizer steps that is before training, and after the first step,
how long it would take at the speed just measured."""

from __future__ import annotations

import logging
import time

from transformers import TrainerCallback

from backend.config import MANY_STEPS
from backend.runs.files import update_status

log = logging.getLogger("backend.train")

# A longer estimate than this (seconds) and the plan gets a warning.
LONG_S = 7 * 86400


def human_duration(seconds: float) -> str:
    """3e9 -> '95 years'; readable from seconds to the age of the universe and beyond."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            value = seconds / size
            return f"{value:.3g} {unit}" if value < 1e6 else f"{value:.1e} {unit}"
    return f"{seconds:.0f} seconds"


def steps_warning(total_steps: int, config) -> str | None:
    if total_steps <= MANY_STEPS:
        return None
    source = f"max_steps={config.max_steps}" if config.max_steps > 0 else f"num_train_epochs={config.num_train_epochs:g}"
    return (f"the plan is {total_steps:,} optimizer steps ({source}); the time it would take follows after the "
            f"first step. Lower {source.split('=')[0]} unless you mean it.")


def time_warning(remaining_steps: int, seconds_per_step: float, config) -> str | None:
    estimate = remaining_steps * seconds_per_step
    if estimate <= LONG_S:
        return None
    knob = "max_steps" if config.max_steps > 0 else "num_train_epochs"
    return (f"at {seconds_per_step:.2g} s a step, the remaining {remaining_steps:,} steps would take about "
            f"{human_duration(estimate)}; stop the run and lower {knob} unless you mean it.")


class PlanCheck(TrainerCallback):
    """After the first optimizer step of this process: warn when the rest would take over a week."""

    def __init__(self, run_dir, config):
        self.run_dir, self.config = run_dir, config
        self.started: float | None = None
        self.first_step: int | None = None
        self.warnings: list[str] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.started, self.first_step = time.monotonic(), state.global_step

    def on_step_end(self, args, state, control, **kwargs):
        if self.started is None or state.global_step != (self.first_step or 0) + 1:
            return control
        warning = time_warning(state.max_steps - state.global_step, time.monotonic() - self.started, self.config)
        if warning and state.is_world_process_zero:
            self.warnings.append(warning)
            log.warning(warning)
            if self.run_dir is not None:
                update_status(self.run_dir, plan_warning=warning)
        return control
