"""The run queue: runs that wait for their devices and start by themselves, in order.

The queue is nothing but run folders: a run in it has `queue_seq` (a sortable
number: lower starts first) and `queued_at` in its status.json, and `sweep_id`
when a sweep made it. It waits while its state is `queued` without a pid; once
started it is an ordinary run (state running, then completed / stopped /
failed), and its `queue_seq` stays as the record that it came through the queue.
So the queue survives an app restart, and any process may serve it
(scheduler.py: the app, or the command line's `--queue`).

Order is FIFO per device: a waiting run starts when every device it needs is
free and no run before it in the queue waits for one of them (a run on other
devices may start sooner). Every decision and launch happens under the
workspace's launch lock (RunStore.launch_lock), and the store re-reads
status.json under that lock before launching, so two schedulers never start
the same run twice.

    enqueue(store, config, sweep_id=None) -> run id   queued; started at once when its devices are free
    queue_order(store) -> list[QueueEntry]             running queue runs, then the waiting ones in order,
                                                       each with its estimated start and end (queue_times.py)
    advance(store) -> list[run id]                     start every waiting run that is due
    cancel(store, run_id)                              a waiting run leaves the queue (state stopped)
    move(store, run_id, "up" | "down") -> position     swap with the waiting run before / after it
    start_now(store, run_id, devices=None)             start a waiting run at once (on other devices)
    queue_summary(store) -> QueueSummary               counts since the queue was last idle, failures named
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.messages import message_of, msg
from backend.runs.files import CONFIG_FILE, FINAL_STATES, read_status, update_status
from backend.runs.info import RunError, RunInfo, is_waiting
from backend.runs.queue_times import fill_times
from backend.runs.store import RunStore
from backend.scale import launch


@dataclass
class QueueEntry:
    """One run of the queue as the Runs tab shows it."""

    info: RunInfo
    position: int | None            # 1, 2 ... among the waiting runs; None once it runs
    waiting_behind: str | None      # the run it waits for (holding its devices, or before it on them)
    estimated_start: float | None = None  # unix s; None: unknown (a run before it has no estimate)
    estimated_end: float | None = None
    duration_s: float | None = None       # the run's own estimated duration (remaining, once it runs)
    estimate_source: str = "unknown"      # where duration_s came from (queue_times.py)


@dataclass
class QueueSummary:
    """The queue since it was last idle (no run waiting or running that came through it)."""

    waiting: int = 0
    running: int = 0
    completed: int = 0
    stopped: int = 0  # stopped or cancelled
    failed: list[tuple[str, str]] = field(default_factory=list)  # (run id, its error), failed or lost runs


def enqueue(store: RunStore, config: RunConfig, sweep_id: str | None = None) -> str:
    """Create the run (the same checks as a start: packages, devices) and put it at the end of the
    queue; it starts here and now when its devices are free. Returns the run id."""
    with store.launch_lock():  # the folder is born in the queue: no moment as a run nobody will start
        seqs = [s["queue_seq"] for s in _statuses(store).values() if is_waiting(s)]
        run_id = store.create(config, queue_seq=max([time.time(), *[q + 1e-3 for q in seqs]]),
                              queued_at=time.time(), sweep_id=sweep_id)
        advance(store)
    return run_id


def waiting_runs(store: RunStore) -> list[str]:
    """Ids of the waiting runs, in queue order."""
    statuses = _statuses(store)
    waiting = [(s["queue_seq"], run_id) for run_id, s in statuses.items() if is_waiting(s)]
    return [run_id for _, run_id in sorted(waiting)]


def advance(store: RunStore) -> list[str]:
    """Start every waiting run that is due (FIFO per device); returns the ids started. A run whose
    launch fails is marked failed by the store and the queue goes on with the next."""
    started = []
    with store.launch_lock():
        waiting = waiting_runs(store)
        if not waiting:
            return started
        claimed = set(store.busy_devices())
        for run_id in waiting:
            devices = set(read_status(store.runs_dir / run_id).get("devices") or [])
            if devices & claimed:
                claimed |= devices  # no later run overtakes it on these devices
                continue
            try:
                store.start(run_id)
                started.append(run_id)
            except RunError:
                pass  # launch failed (recorded as failed in its status.json) or started by another store
            except (KeyError, TypeError, OSError) as error:  # a status.json edited by hand: that run fails,
                said = msg("run.launch_failed", run_id=run_id, error=error)  # the rest of the queue goes on
                update_status(store.runs_dir / run_id, state="failed", ended_at=time.time(), error=str(said),
                              error_message=said.to_dict())
            if read_status(store.runs_dir / run_id).get("state") in ("queued", "running"):
                claimed |= devices  # started, or still waiting; a run that failed to start holds nothing
    return started


def blocker(store: RunStore, run_id: str) -> str | None:
    """The run a waiting run waits for: the live run on its devices, else the waiting run before it
    that shares a device. None when it is not waiting (or nothing holds it: it starts on the next tick)."""
    return _blockers(store).get(run_id)


def _blockers(store: RunStore) -> dict[str, str | None]:
    busy = store.busy_devices()
    holder: dict[str, str] = dict(busy)  # device -> the run it waits behind
    out: dict[str, str | None] = {}
    for run_id in waiting_runs(store):
        devices = read_status(store.runs_dir / run_id).get("devices") or []
        out[run_id] = next((holder[d] for d in devices if d in holder), None)
        for device in devices:
            holder[device] = run_id
    return out


def queue_order(store: RunStore, with_times: bool = True, estimate: Callable[..., object] | None = None) -> list[QueueEntry]:
    """The running runs that came through the queue, then the waiting runs in the order they will
    start, with estimated start and end when `with_times`. `estimate` makes a run's time estimate
    before it has one (queue_times.Estimator: the caller passes the training side's)."""
    blockers = _blockers(store)  # first: it refreshes every run, so a vanished worker is not shown running
    statuses = _statuses(store)
    running = [r for r, s in statuses.items()
               if s.get("queue_seq") is not None and s.get("state") in ("queued", "running") and s.get("pid")]
    running.sort(key=lambda r: statuses[r].get("started_at") or 0)
    entries = [QueueEntry(store.get(r), None, None) for r in running]
    entries += [QueueEntry(store.get(r), n, blockers.get(r)) for n, r in enumerate(waiting_runs(store), 1)]
    if with_times:
        fill_times(store, entries, estimate=estimate)
    return entries


def cancel(store: RunStore, run_id: str) -> None:
    """Take a waiting run out of the queue: it is kept, as `stopped` before its first step."""
    with store.launch_lock():
        _must_wait(store, run_id)
        update_status(store.runs_dir / run_id, when=is_waiting, state="stopped", ended_at=time.time(),
                      cancelled_at=time.time(), advice=str(msg("queue.cancelled")),
                      advice_message=msg("queue.cancelled").to_dict())


def move(store: RunStore, run_id: str, direction: str) -> int:
    """Swap a waiting run with the one before it ("up") or after it ("down"); returns its new
    position (1 = next to start). At either end it stays where it is."""
    if direction not in ("up", "down"):
        raise ValueError(f"direction must be 'up' or 'down', not {direction!r}")
    with store.launch_lock():
        _must_wait(store, run_id)
        order = waiting_runs(store)
        here = order.index(run_id)
        there = here - 1 if direction == "up" else here + 1
        if 0 <= there < len(order):
            other = order[there]
            mine, theirs = (read_status(store.runs_dir / r)["queue_seq"] for r in (run_id, other))
            update_status(store.runs_dir / run_id, queue_seq=theirs)
            update_status(store.runs_dir / other, queue_seq=mine)
            here = there
        advance(store)  # moved to the front of free devices: it starts now
    return here + 1


def start_now(store: RunStore, run_id: str, devices: str | None = None) -> None:
    """Start a waiting run at once, on `devices` (a RunConfig.devices setting such as "cpu" or "1")
    instead of its own when given; refused, with the run that holds them, when they are busy.
    config.yaml is rewritten with the new devices: the run has not started, so it is still the
    config it will train with."""
    with store.launch_lock():
        _must_wait(store, run_id)
        run_dir = store.runs_dir / run_id
        if devices is not None and devices.strip():
            info = store.get(run_id)
            if info.config is None:  # config.yaml unreadable: info.error says why
                raise RunError(info.error)
            config = info.config
            try:
                moved = config.with_overrides([f"devices={devices.strip()}"])
            except ConfigError as error:
                raise RunError(message_of(error) or str(error)) from None
            found = store.devices_for(moved)  # a device that is not here: refused with its sentence
            held, busy = launch.held_devices(moved, found), store.busy_devices()
            taken = [d for d in held if d in busy]
            if taken:  # refused before config.yaml changes: the run keeps waiting for its own devices
                raise RunError(msg("run.busy", devices=", ".join(taken), run_id=busy[taken[0]]))
            moved.save(run_dir / CONFIG_FILE)
            argv, _ = store.command_for(moved, run_dir)
            update_status(run_dir, devices=held, command=argv,
                          node_commands=store.node_commands(moved, run_dir))
        store.start(run_id)


def queue_summary(store: RunStore) -> QueueSummary:
    """Counts of the runs that came through the queue since it was last idle: the newest stretch
    in which each run entered the queue before the runs before it had all ended."""
    statuses = {r: s for r, s in _statuses(store).items() if s.get("queue_seq") is not None}
    by_entry = sorted(statuses, key=lambda r: statuses[r].get("queued_at") or 0)
    start = 0
    ended_by = 0.0  # the latest end among the runs before the one looked at; inf while one is open
    for n, run_id in enumerate(by_entry):
        if n and (statuses[run_id].get("queued_at") or 0) > ended_by:
            start = n  # the queue was idle before this run came
        status = statuses[run_id]
        end = status.get("ended_at") if status.get("state") in (*FINAL_STATES, "lost") else None
        ended_by = max(ended_by, end if end is not None else float("inf"))
    summary = QueueSummary()
    for run_id in by_entry[start:]:
        status = statuses[run_id]
        state = status.get("state")
        if is_waiting(status):
            summary.waiting += 1
        elif state in ("queued", "running"):
            summary.running += 1
        elif state == "completed":
            summary.completed += 1
        elif state == "stopped":
            summary.stopped += 1
        else:  # failed or lost
            summary.failed.append((run_id, _first_line(status.get("error") or state or "")))
    return summary


def _must_wait(store: RunStore, run_id: str) -> None:
    status = store.refresh(run_id)  # also refuses an unknown run id with its sentence
    if not is_waiting(status):
        raise RunError(msg("queue.not_waiting", run_id=run_id, state=status.get("state")))


def _statuses(store: RunStore) -> dict[str, dict]:
    """status.json of every run folder (one small read each: cheap enough for each tick)."""
    return {d.name: read_status(d) for d in store.run_dirs()}


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""
