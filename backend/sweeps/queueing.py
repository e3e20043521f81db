"""A sweep becomes N queued runs (backend/runs/queue.py) that share a sweep id.

Every combination is validated first (grid.sweep_configs); only then is anything created, so a
refused sweep leaves no run behind. A run whose creation is refused mid-way (its devices) takes
the runs queued before it back out. The sweep's own record, workspace/sweeps/<sweep id>.json,
holds the grid, the target and each run's id and values: the Runs tab's sweep table reads it.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path

from backend.config import RunConfig
from backend.runs.info import RunError
from backend.runs.queue import cancel, enqueue
from backend.runs.store import RunStore
from backend.runs.workspace import Workspace
from backend.storage.atomic_files import atomic_write_json, read_json
from backend.storage.safe_names import is_plain_name
from backend.sweeps.grid import Sweep, sweep_configs

SWEEPS_DIR = "sweeps"


def new_sweep_id() -> str:
    return "sweep-" + time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def sweep_file(workspace: Workspace, sweep_id: str) -> Path:
    if not is_plain_name(sweep_id):  # ids arrive from the UI: never a path
        raise ValueError(f"not a sweep id: {sweep_id!r}")
    return workspace.root / SWEEPS_DIR / f"{sweep_id}.json"


def sweep_run_name(base: RunConfig, index: int) -> str:
    """The run_name of the sweep's `index`-th run (from 1): <run_name or sweep>-<index>."""
    return f"{base.run_name or 'sweep'}-{index}"


def planned_configs(sweep: Sweep, base: RunConfig) -> list[RunConfig]:
    """The sweep's runs as RunConfigs, labelled <run_name or sweep>-<n>; raises SweepError for a refused one."""
    configs = sweep_configs(sweep, base)
    return [RunConfig.from_dict({**c.to_dict(), "run_name": sweep_run_name(base, i)}) for i, c in enumerate(configs, 1)]


def queue_sweep(store: RunStore, sweep: Sweep, base: RunConfig, estimates: list[dict] | None = None) -> dict:
    """Queue every run of the sweep; returns its record. Raises SweepError (a refused combination,
    nothing created) or RunError (a run the store refused; the ones queued before it are removed)."""
    configs = planned_configs(sweep, base)
    sweep_id = new_sweep_id()
    record = {"sweep_id": sweep_id, "created_at": time.time(), **sweep.as_dict(), "base": base.to_dict(),
              "runs": []}
    path = sweep_file(store.workspace, sweep_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    queued: list[str] = []
    try:
        for index, (values, config) in enumerate(zip(sweep.combinations, configs)):  # values as RunConfig typed them
            run_id = enqueue(store, config, sweep_id=sweep_id)
            queued.append(run_id)
            record["runs"].append({"run_id": run_id, "values": {f: getattr(config, f) for f in values},
                                   "estimate": (estimates or [None] * len(configs))[index]})
            atomic_write_json(path, record)  # the table finds the runs already queued
    except RunError:
        for run_id in queued:
            _take_back(store, run_id)
        path.unlink(missing_ok=True)
        raise
    return record


def _take_back(store: RunStore, run_id: str) -> None:
    try:
        cancel(store, run_id)
    except RunError:
        store.stop(run_id, grace_s=5)  # it had started already: its devices were free
        return
    store.delete(run_id)


def read_sweep(workspace: Workspace, sweep_id: str) -> dict | None:
    try:
        return read_json(sweep_file(workspace, sweep_id), default=None)
    except ValueError:
        return None


def list_sweeps(workspace: Workspace) -> list[dict]:
    """Every sweep record of the workspace, newest first."""
    folder = workspace.root / SWEEPS_DIR
    records = [read_json(p, default=None) for p in folder.glob("sweep-*.json")] if folder.is_dir() else []
    return sorted([r for r in records if isinstance(r, dict) and r.get("sweep_id")],
                  key=lambda r: r.get("created_at") or 0, reverse=True)
