"""`python -m backend.train --config run.yaml --sweep sweep.yaml [--set k=v ...] [--workspace W] [--dry-run]`

Checks every combination through RunConfig, prints the runs with their time estimate and the
total, then queues them (one sweep id) and serves the queue until every run of the sweep has
ended, printing each end and, at last, the table with the best run by the target. --dry-run
stops after the check and the estimate: nothing is queued. Exit code 0 when every run completed,
1 when one did not, 2 for a sweep or config that cannot run (a sentence on stderr).
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
from backend.runs.scheduler import QueueScheduler
from backend.runs.store import RunStore
from backend.runs.workspace import DEFAULT_WORKSPACE, Workspace
from backend.sweeps.grid import SweepError, load_sweep
from backend.sweeps.queueing import planned_configs, queue_sweep
from backend.sweeps.sweep_table import sweep_table
from backend.training.estimate import estimate_run_seconds, short_duration, total_of

TICK_S = 2.0


def run_sweep(args: argparse.Namespace, tick_s: float = TICK_S) -> int:
    try:
        if args.resume or args.run_dir:
            raise ConfigError(msg("sweep.cli_only_new", flag="--resume" if args.resume else "--run-dir"))
        if not args.config and not args.overrides and not args.recipe:
            raise ConfigError(msg("train.no_config"))
        base = (RunConfig.load(args.config) if args.config else recipe_config(args.recipe or "starter")) \
            .with_overrides(args.overrides)
        sweep = load_sweep(args.sweep)
        configs = planned_configs(sweep, base)
        workspace = Workspace(args.workspace or DEFAULT_WORKSPACE)
        estimates = run_estimates(configs, workspace)
        print_plan(sweep, configs, estimates)
        if args.dry_run:
            print("dry run: nothing was queued", file=sys.stderr)
            return 0
        store = RunStore(workspace.ensure())
        record = queue_sweep(store, sweep, base, [e.to_dict() if e else None for e in estimates])
    except (ConfigError, SweepError, RunError) as error:
        print(f"error: {message_of(error) or error}", file=sys.stderr)
        return 2
    print(msg("sweep.queued", sweep_id=record["sweep_id"], count=len(record["runs"]), total=""), file=sys.stderr,
          flush=True)
    return wait_for(store, record, tick_s)


def run_estimates(configs: list[RunConfig], workspace: Workspace) -> list:
    """Each run's Estimate (None where none can be made)."""

    out = []
    for config in configs:
        try:
            out.append(estimate_run_seconds(config, workspace))
        except (ValueError, OSError):
            out.append(None)
    return out


def total_text(estimates: list) -> str:
    known = [e for e in estimates if e is not None]
    if not known:
        return ""
    total = total_of(known)
    sources = ", ".join(f"{n} from {source}" for source, n in total["sources"].items())
    return str(msg("estimate.total", count=len(known), mid=short_duration(total["mid"]),
                   low=short_duration(total["low"]), high=short_duration(total["high"]), sources=sources))


def print_plan(sweep, configs: list[RunConfig], estimates: list) -> None:
    size = f"{len(configs)} of a grid of {sweep.grid_size}" if sweep.sample else f"{len(configs)}"
    print(f"sweep: {size} runs over {', '.join(sweep.fields)}; target {sweep.target} ({sweep.direction})")
    for index, (config, estimate) in enumerate(zip(configs, estimates), 1):
        shown = ", ".join(f"{k}={getattr(config, k)}" for k in sweep.fields)
        time_text = f"about {short_duration(estimate.seconds_mid)} ({estimate.source})" if estimate else "no estimate"
        print(f"  {index}. {shown}: {time_text}")
    if total := total_text(estimates):
        print(f"time: {total}")


def wait_for(store, record: dict, tick_s: float) -> int:
    """Serve the queue until every run of the sweep has ended; print the table."""

    scheduler = QueueScheduler(store, interval_s=tick_s)
    run_ids = [r["run_id"] for r in record["runs"]]
    ended: dict[str, str] = {}
    try:
        while len(ended) < len(run_ids):
            scheduler.tick()
            for run_id in run_ids:
                state = store.refresh(run_id).get("state")
                if run_id not in ended and state in (*FINAL_STATES, "lost"):
                    ended[run_id] = state
                    print(msg("queue.ended", run_id=run_id, state=state), file=sys.stderr, flush=True)
            if len(ended) < len(run_ids):
                time.sleep(tick_s)
    except KeyboardInterrupt:
        print(f"stopped waiting; the sweep's runs stay queued (sweep {record['sweep_id']})", file=sys.stderr)
        return 130
    finally:
        scheduler.release()
    print_table(store.workspace, record["sweep_id"])
    return 0 if all(state == "completed" for state in ended.values()) else 1


def print_table(workspace: Workspace, sweep_id: str) -> None:
    table = sweep_table(workspace, sweep_id)
    if table is None:
        return
    print(f"{'':2}{'run':32} {'  '.join(table.fields)}  {table.target}  time_s  tokens/s  peak_gb")
    for row in table.rows:
        values = "  ".join(str(row.values.get(f)) for f in table.fields)
        print(f"{'* ' if row.best else '  '}{row.run_id:32} {values}  {_num(row.target)}  {_num(row.wall_s)}  "
              f"{_num(row.tokens_per_second)}  {_num(row.peak_memory_gb)}  {row.state}")
    if table.best:
        print(f"best by {table.target} ({table.direction}): {table.best.run_id}")


def _num(value) -> str:
    return "-" if value is None else f"{value:.4g}"
