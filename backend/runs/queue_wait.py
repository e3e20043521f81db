"""`python -m backend.train --config run.yaml --queue`: queue a run and wait for it.

The process puts the run in the workspace's queue (queue.py), then ticks a
QueueScheduler until the run has ended: while no app is open it is the one
that starts queued runs when their devices free up, its own and any before
it. It prints when the run starts and how it ended; exit code 0 when it
completed, 1 when it failed, was lost, stopped or cancelled, 2 for a bad
config. Ctrl-C stops waiting and leaves the run in the queue.
"""

from __future__ import annotations

import argparse
import sys
import time

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.config_recipes import recipe_config
from backend.messages import message_of, msg
from backend.runs.files import FINAL_STATES
from backend.runs.info import RunError
from backend.runs.queue import blocker, enqueue, is_waiting
from backend.runs.scheduler import QueueScheduler
from backend.runs.store import RunStore
from backend.runs.workspace import DEFAULT_WORKSPACE, Workspace

TICK_S = 2.0


def enqueue_and_wait(args: argparse.Namespace, tick_s: float = TICK_S) -> int:
    for flag in ("run_dir", "resume", "sweep", "dry_run"):
        if getattr(args, flag, None):
            return _refuse(msg("queue.cli_only_new", flag="--" + flag.replace("_", "-")))
    try:
        if not args.config and not args.overrides and not args.recipe:
            raise ConfigError(msg("train.no_config"))
        base = RunConfig.load(args.config) if args.config else recipe_config(args.recipe or "starter")
        config = base.with_overrides(args.overrides)
        store = RunStore(Workspace(args.workspace or DEFAULT_WORKSPACE).ensure())
        run_id = enqueue(store, config)
    except (ConfigError, RunError) as error:
        return _refuse(message_of(error) or error)
    print(f"run {run_id}: {store.runs_dir / run_id}", file=sys.stderr, flush=True)
    scheduler = QueueScheduler(store, interval_s=tick_s)
    said_queued = said_started = False
    try:
        while True:
            status = store.refresh(run_id)
            if is_waiting(status):
                behind = blocker(store, run_id)
                if behind and not said_queued:
                    print(msg("queue.queued", run_id=run_id, behind=behind), file=sys.stderr, flush=True)
                    said_queued = True
            elif not said_started and status.get("pid"):
                print(msg("queue.started", run_id=run_id), file=sys.stderr, flush=True)
                said_started = True
            state = status.get("state")
            if state in (*FINAL_STATES, "lost"):
                print(msg("queue.ended", run_id=run_id, state=state), file=sys.stderr, flush=True)
                return 0 if state == "completed" else 1
            scheduler.tick()
            time.sleep(tick_s)
    except KeyboardInterrupt:
        if is_waiting(store.refresh(run_id)):
            print(msg("queue.left_waiting", run_id=run_id), file=sys.stderr, flush=True)
        return 130
    finally:
        scheduler.release()


def _refuse(text) -> int:
    print(f"error: {text}", file=sys.stderr)
    return 2
