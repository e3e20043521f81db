"""`python -m backend.train --config run.yaml --dry-run`: the checks a run makes before it loads
anything, then its steps and time estimate on stdout; no run folder is made, nothing trains."""

from __future__ import annotations

import sys

from backend.config_policy import ConfigError
from backend.messages import msg
from backend.models.hardware import training_devices
from backend.training.cli import prepare_job
from backend.training.errors import fail
from backend.training.estimate import estimate_run_seconds, planned_steps


def dry_run(args) -> int:
    try:
        job = prepare_job(args)
        steps = planned_steps(job.config, job.workspace)
    except Exception as error:  # the same sentence and exit code a real start would give
        return fail(None, error, None)
    print(f"config: {job.config.model_name_or_path}, {job.config.method}, dataset {job.config.dataset}")
    print(f"steps: {steps} optimizer steps (rows before the cutoff filter: at most)")
    try:
        print(f"time: {estimate_run_seconds(job.config, job.workspace, steps, _devices(job.config)).message()}")
    except (ValueError, OSError, ConfigError) as error:
        print(f"time: {msg('estimate.unavailable', reason=error)}")
    print("dry run: nothing was started", file=sys.stderr)
    return 0


def _devices(config):
    try:
        return training_devices(config.devices)
    except ValueError:
        return None
