"""The training worker: `python -m backend.train --config run.yaml [--run-dir DIR] [--set k=v ...]`.

Runs in its own process (started by backend/runs/store.py or by hand, or under
torchrun for DDP) and talks to the rest of the app only through the run folder
(docs/CONTRACTS.md, the run directory): config.yaml, status.json, metrics.jsonl, train.log,
checkpoint-<step>/ + COMPLETE, final/, summary.json. SIGTERM saves a
checkpoint at the next step boundary and exits 0 with state "stopped".
Exit codes: 0 completed or stopped, 1 failed while running, 2 bad config or path.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import psutil

from backend.messages import Message
from backend.runs.files import read_status, update_status
from backend.training.cli import StopRequest, create_run_dir, parse_args, prepare, setup_logging
from backend.training.errors import fail
from backend.training.model_stage import BuildStopped, stopped_during_build


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.print_default_config:
        from backend.config_recipes import recipe_config

        print(recipe_config(args.recipe or "starter").to_yaml(), end="")
        return 0
    if args.sweep:  # not the worker: queues the sweep's runs and serves the queue until they end
        from backend.sweeps.cli import run_sweep

        return run_sweep(args)
    if args.queue:  # not the worker: a process that queues the run and waits for it (no torch here)
        from backend.runs.queue_wait import enqueue_and_wait

        return enqueue_and_wait(args)
    if args.dry_run:
        from backend.training.dry_run import dry_run

        return dry_run(args)
    stop = StopRequest().install()  # first: a stop during the slow loading still ends cleanly
    job = None
    try:
        job = prepare(args)
        create_run_dir(job)
        setup_logging(job)
        mark_running(job)
        if job.config.ray_address:  # this process is Ray's driver; the workers train
            from backend.training.ray_run import run_on_ray

            return run_on_ray(job, stop)
        from backend.training.session import build, finish, train  # torch: after the cheap checks

        session = build(job, stop)
        final_state = train(session, stop)
        return finish(session, final_state)
    except BuildStopped:  # Stop while the demo model was being built: nothing to save
        return stopped_during_build(job.run_dir if job and job.is_main else None)
    except Exception as error:  # every failure ends as error + advice in status.json
        return fail(job, error, args.resume or args.run_dir)


def mark_running(job) -> None:
    """status.json at start; keeps what the run store wrote (pid, command, devices...)."""
    for warning in job.warnings:
        logging.getLogger("backend.train").warning(str(warning))
    if not job.is_main:
        return
    me = psutil.Process()
    fields = {"state": "running", "worker_pid": os.getpid(), "pgid": os.getpgid(0),
              "create_time": me.create_time(), "worker_started_at": time.time(),
              "exit_code": None, "error": None, "advice": None, "ended_at": None, "plan_warning": None}
    recorded = read_status(job.run_dir)
    if not recorded.get("pid"):
        fields["pid"] = os.getpid()
    if (recorded.get("stop_requested_at") or 0) < me.create_time():  # a stop sent to an earlier process
        fields.update(stop_requested_at=None, stop_note=None)
    if job.resuming:
        fields["resumed_from"] = job.resume_from.name if job.resume_from else None
        # Shown above the running run in the Runs tab (in the user's language), not only in train.log.
        fields["resume_warnings"] = [w.to_dict() if isinstance(w, Message) else str(w) for w in job.warnings]
    update_status(job.run_dir, **fields)


if __name__ == "__main__":
    sys.exit(main())
