"""Estimated start and end of each run in the queue (queue.py's QueueEntry).

A run's duration: once it has taken steps, the steps left times its own
seconds per step so far; before, the time estimate (this machine's speed log, a
speed probe, or the model's FLOPs), kept in the run's status.json as `estimate`
so it is computed once per run (the worker writes its own there when it starts
training), plus the start-up (process, imports, model load) of the newest
completed run of the model here; else the planned steps times the seconds per
step of the newest completed run of the same model and method here. Without
any it is unknown, and so is every later start on its devices: the queue shows
"unknown" rather than a guess. Starts follow the queue's own rule: a run starts
when the runs before it on its devices have ended.

The estimate itself is the training side's (backend/training/estimate.py): the caller
that shows the queue passes it in as `estimate`, so the run store never imports the
data and model code it needs. Without one, a run's estimate is only what its
status.json already holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from backend.messages import message_of
from backend.runs.files import SUMMARY_FILE, read_status, update_status
from backend.runs.info import RunError, RunInfo
from backend.runs.store import RunStore
from backend.storage.atomic_files import read_json

RETRY_S = 60  # seconds before an estimate that could not be made is tried again
# estimate(config, workspace, devices=[...]) -> its Estimate (to_dict()); raises ValueError, RunError or
# OSError when it cannot be made (backend/training/estimate.py's estimate_run_seconds).
Estimator = Callable[..., object]


def fill_times(store: RunStore, entries: list, now: float | None = None, estimate: Estimator | None = None) -> None:
    """Set duration_s, estimate_source, estimated_start and estimated_end on queue entries given
    running first, then waiting in queue order."""
    now = time.time() if now is None else now
    free_at: dict[str, float | None] = {}  # device -> when it is free (None: unknown)
    for run_id, end in _other_live_runs(store, entries, now, estimate):
        for device in read_status(store.runs_dir / run_id).get("devices") or []:
            free_at[device] = end
    for entry in entries:
        info = entry.info
        entry.duration_s, entry.estimate_source = run_duration(store, info, now, estimate)
        if entry.position is None:  # running
            entry.estimated_start = info.started_at
            entry.estimated_end = now + entry.duration_s if entry.duration_s is not None else None
        else:
            waits = [free_at.get(d, now) for d in info.devices]
            entry.estimated_start = None if None in waits else max([now, *waits])
            entry.estimated_end = (entry.estimated_start + entry.duration_s
                                   if entry.estimated_start is not None and entry.duration_s is not None else None)
        for device in info.devices:
            free_at[device] = entry.estimated_end


def run_duration(store: RunStore, info: RunInfo, now: float,
                 estimate: Estimator | None = None) -> tuple[float | None, str]:
    """(seconds, source) the run still needs: "measured" from its own steps; the estimate's source
    ("runs", "probe", "flops"); "earlier_run" from a finished run's speed; "unknown" (None)."""
    if info.state == "running" and info.global_step > 0 and info.max_steps and info.started_at:
        per_step = (now - info.started_at) / info.global_step
        return max(0.0, (info.max_steps - info.global_step) * per_step), "measured"
    made = _estimate(store, info, estimate)
    if made and made.get("seconds_mid") is not None:
        # The estimate is training time; the worker first starts and loads the model.
        start_up = _start_up_seconds(store, info)
        if info.state == "running" and info.started_at:
            start_up = max(0.0, start_up - (now - info.started_at))
        return float(made["seconds_mid"]) + start_up, str(made.get("source") or "estimate")
    steps = info.max_steps
    per_step = _seconds_per_step_of_earlier_run(store, info)
    if steps and per_step:
        left = steps - (info.global_step if info.state == "running" else 0)
        return max(0.0, left * per_step), "earlier_run"
    return None, "unknown"


def _estimate(store: RunStore, info: RunInfo, estimate: Estimator | None) -> dict | None:
    """status.json's `estimate`, made now (once, by `estimate`) for a waiting or starting run that has none.
    A run the estimate cannot cover yet records why (`estimate_error`) and is tried again only after
    RETRY_S (the demo model, say, is built by the first run)."""
    status = read_status(info.run_dir)
    tried = status.get("estimate_tried_at") or 0
    if (estimate is None or status.get("estimate") or time.time() - tried < RETRY_S
            or info.state not in ("queued", "running") or info.config is None):
        return status.get("estimate")
    try:
        made = estimate(info.config, store.workspace, devices=store.devices_for(info.config)).to_dict()
    except (ValueError, RunError, OSError) as error:
        update_status(info.run_dir, estimate_error=str(message_of(error) or error), estimate_tried_at=time.time())
        return None
    update_status(info.run_dir, estimate=made)
    return made


def _start_up_seconds(store: RunStore, info: RunInfo) -> float:
    """Seconds from a worker's start to its training, and after it (imports, model load, the final
    save), of the newest completed run of the same model here: its start-to-end time less its
    summary.json wall_time_s. 0 when there is none."""
    done = [i for i in store.list() if i.state == "completed" and i.model == info.model
            and i.started_at and i.ended_at]
    for newest in sorted(done, key=lambda i: i.ended_at, reverse=True):
        trained = (read_json(newest.run_dir / SUMMARY_FILE, default={}) or {}).get("wall_time_s")
        if trained is not None:
            return max(0.0, newest.ended_at - newest.started_at - float(trained))
    return 0.0


def _seconds_per_step_of_earlier_run(store: RunStore, info: RunInfo) -> float | None:
    done = [i for i in store.list() if i.state == "completed" and i.model == info.model
            and i.method == info.method and i.global_step and i.started_at and i.ended_at]
    if not done:
        return None
    newest = max(done, key=lambda i: i.ended_at)
    return (newest.ended_at - newest.started_at) / newest.global_step


def _other_live_runs(store: RunStore, entries: list, now: float,
                     estimate: Estimator | None) -> list[tuple[str, float | None]]:
    """Live runs that did not come through the queue (started directly), with their estimated end."""
    shown = {e.info.run_id for e in entries}
    out = []
    for run_id in set(store.busy_devices().values()) - shown:
        info = store.get(run_id)
        seconds, _ = run_duration(store, info, now, estimate)
        out.append((run_id, now + seconds if seconds is not None else None))
    return out
