"""The training worker: `python -m backend.train --config run.yaml [--run-dir DIR] [--set k=v ...]`.

Runs in its own process (started by backend/runs/store.py or by hand, or under
torchrun for DDP) and talks to the rest of the app only through the run folder
(docs/CONTRACTS.md, the run directory): config.yaml, status.json, metrics.jsonl, train.log,
checkpoint-<step>/ + COMPLETE, final/, summary.json. SIGTERM saves a
checkpoint at the next step boundary and exits 0 with state "stopped"; before
the first step, with nothing to save, it exits 0 "stopped" at once.
Exit codes: 0 completed or stopped, 1 failed while running, 2 bad config or path.
"""

from __future__ import annotations

import sys

from backend.config_recipes import recipe_config
from backend.runs.queue_wait import enqueue_and_wait
from backend.sweeps.cli import run_sweep
from backend.training.cli import parse_args
from backend.training.dry_run import dry_run
from backend.training.worker import run_worker


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.print_default_config:
        print(recipe_config(args.recipe or "starter").to_yaml(), end="")
        return 0
    if args.sweep:  # not the worker: queues the sweep's runs and serves the queue until they end
        return run_sweep(args)
    if args.queue:  # not the worker: a process that queues the run and waits for it (no torch here)
        return enqueue_and_wait(args)
    if args.dry_run:
        return dry_run(args)
    return run_worker(args)


if __name__ == "__main__":
    sys.exit(main())
