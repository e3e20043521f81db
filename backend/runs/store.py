"""The run store: create, start, stop, resume, list and delete runs.

A run is its folder, workspace/runs/<run-id>/ (docs/CONTRACTS.md, the run directory); nothing
about a run lives only in memory, so a restarted UI finds every run again,
reports a live worker as running and keeps charting it. Who writes
status.json: this store before launch and right after it (queued, then
running with pid + create_time), the worker while it runs and at its end,
and this store again only once the worker is gone without a final state
(lost) or was killed after a stop's grace period.

Policy: one job per device set. A start on devices a live run holds is
refused here with a message naming that run; the queue (queue.py) is the
way to wait for them instead.
"""

from __future__ import annotations

import contextlib
import errno
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.messages import Message, message_of, msg
from backend.models import memory_advice
from backend.models.hardware import Device, detect_devices, training_devices
from backend.runs import processes
from backend.runs.files import (
    CONFIG_FILE,
    FINAL_STATES,
    LOG_FILE,
    list_checkpoints,
    new_run_dir,
    read_status,
    remove_stray_tmp,
    tail_text,
    update_status,
)
from backend.runs.info import Checkpoint, InfoReader, RunError, RunInfo
from backend.runs.notify import announce_end
from backend.runs.workspace import Workspace
from backend.scale import launch
from backend.scale.guards import check_environment
from backend.storage.file_lock import file_lock
from backend.storage.safe_names import clean_name, is_plain_name

RESUMABLE = ("stopped", "lost", "failed")
RESUME_EXIT_WAIT_S = 60  # a launcher still exiting after its run ended (seconds)
__all__ = ["Checkpoint", "RunError", "RunInfo", "RunStore"]


class RunStore:
    """Runs of one workspace. Instance state is only a cache (child processes
    to reap, metrics readers); everything that must survive is on disk."""

    def __init__(self, workspace: Workspace, devices: list[Device] | None = None, env: dict | None = None):
        self.workspace = workspace
        self.env = env  # the workers' environment (default: this process's)
        self.runs_dir = workspace.runs_dir
        self._devices = devices  # detected lazily: detection imports torch
        self._children: dict[str, subprocess.Popen] = {}
        self._reader = InfoReader()
        # One status check-and-write at a time (UI handlers and stop escalation run in threads).
        self._refresh_lock = threading.RLock()
        self._launch_depth = threading.local()  # how deep this thread is inside launch_lock()

    # --- create and start ------------------------------------------------------
    def command_for(self, config: RunConfig, run_dir: Path | None = None) -> tuple[list[str], str]:
        """(argv, YAML) that reproduce a run from a shell: save the YAML as
        run.yaml and run argv from the repository folder. With `run_dir`, the
        argv the store itself launches for that run folder."""
        return launch.worker_command(self._worker_args(run_dir), config, self._num_processes(config)), config.to_yaml()

    def node_commands(self, config: RunConfig, run_dir: Path | None = None, resume: bool = False) -> list[list[str]]:
        """The argv for each other machine of a several-node run (docs/SCALE.md)."""
        return launch.other_node_commands(self._worker_args(run_dir, resume), config, self._num_processes(config))

    def _worker_args(self, run_dir: Path | None, resume: bool = False) -> list[str]:
        """The worker's own arguments: a new run folder in this workspace (as the UI would make one),
        the run folder `run_dir`, or its resume."""
        if run_dir is None:
            return ["--config", "run.yaml", "--workspace", str(self.workspace.root)]
        if resume:
            return ["--resume", str(run_dir)]
        return ["--config", str(Path(run_dir) / CONFIG_FILE), "--run-dir", str(run_dir)]

    def create(self, config: RunConfig, **status_fields) -> str:
        """Make the run folder with config.yaml (never edited after) and a
        queued status.json (with `status_fields`, e.g. the queue's); returns the run id."""
        try:
            config.check_packages()
        except ConfigError as error:
            raise RunError(message_of(error) or str(error)) from None
        # Resolved once (the devices check may ask a Ray cluster): the argv, the other nodes'
        # commands and the devices the run holds all come from these two facts.
        devices = self._resolve_devices(config)
        processes_here = launch.processes_per_node(config, devices)
        run_dir = self._new_run_dir(config)
        config.save(run_dir / CONFIG_FILE)
        update_status(run_dir, state="queued", run_id=run_dir.name, created_at=time.time(),
                      command=launch.worker_command(self._worker_args(run_dir), config, processes_here),
                      devices=launch.held_devices(config, devices), model=config.model_name_or_path,
                      method=config.method,
                      node_commands=launch.other_node_commands(self._worker_args(run_dir), config, processes_here),
                      **status_fields)
        return run_dir.name

    def start(self, run_id: str) -> None:
        status = self.refresh(run_id)
        if not _not_started(status):
            raise RunError(msg("run.already_started", run_id=run_id, state=status.get("state")))
        self._launch(run_id, status["command"], {}, still=_not_started,
                     devices_setting=self._devices_setting(run_id))

    def launch(self, config: RunConfig) -> str:
        run_id = self.create(config)
        try:
            self.start(run_id)
        except RunError:
            shutil.rmtree(self._run_dir(run_id), ignore_errors=True)  # a refused start leaves no trace
            raise
        return run_id

    def resume(self, run_id: str, overrides: list[str] | None = None) -> None:
        """Continue a stopped, lost or failed run from its newest complete
        checkpoint. The worker reconciles the config (and fails on a changed
        model or LoRA shape); its error lands in status.json."""
        overrides = list(overrides or [])
        status = self.refresh(run_id)
        state = status.get("state")
        if state not in RESUMABLE:
            reason = (msg(f"run.reason.{state}") if state in ("queued", "running", "completed")
                      else msg("run.reason.state", state=state))
            raise RunError(msg("run.not_resumable", run_id=run_id, reason=reason))
        run_dir = self._run_dir(run_id)
        checkpoints = list_checkpoints(run_dir)
        if not checkpoints:
            raise RunError(msg("run.no_checkpoint", run_id=run_id))
        self._wait_for_exit(run_id, status)
        config = self._reader.config(run_dir)
        try:
            config.with_overrides(overrides)
        except ConfigError as error:
            raise RunError(msg("run.resume_config", run_id=run_id, error=message_of(error) or str(error))) from None
        args = ["--resume", str(run_dir), *[a for item in overrides for a in ("--set", item)]]
        resumed = config.with_overrides(overrides)
        processes_here = self._num_processes(resumed)  # once, for this node's argv and the others'
        argv = launch.worker_command(args, resumed, processes_here)
        others = [c + [a for item in overrides for a in ("--set", item)]
                  for c in launch.other_node_commands(self._worker_args(run_dir, resume=True), resumed, processes_here)]
        self._launch(run_id, argv, {"resumed_from": checkpoints[-1].name, "resume_overrides": overrides,
                                    "node_commands": others,
                                    "ended_at": None, "exit_code": None, "error": None, "advice": None},
                     still=lambda s: s.get("state") in RESUMABLE, devices_setting=resumed.devices)

    def _wait_for_exit(self, run_id: str, status: dict) -> None:
        """A run whose worker wrote its end may still have processes exiting: under torchrun the launcher
        tears down after its rank, holding the rendezvous port (master_port) until it is gone, and a resume
        started before then failed with "address already in use". Wait for them, a bounded time."""
        deadline = time.monotonic() + RESUME_EXIT_WAIT_S
        while _alive(status):
            if time.monotonic() > deadline:
                raise RunError(msg("run.still_ending", run_id=run_id, pid=_live_process(status)[0],
                                   seconds=RESUME_EXIT_WAIT_S))
            time.sleep(0.2)

    def _devices_setting(self, run_id: str) -> str:
        """The `devices` setting of a run not started yet (its config.yaml); "auto" when that cannot be
        read: the worker then fails on it with its own sentence."""
        try:
            return self._reader.config(self._run_dir(run_id)).devices
        except RunError:
            return "auto"

    def _launch(self, run_id: str, argv: list[str], fields: dict, still=None,
                devices_setting: str | None = None) -> None:
        """Start `argv` for the run unless its devices are busy, or (`still`) its status.json,
        read again under the lock, no longer allows it: two stores (two app processes, the
        queue's schedulers) that saw the same run ready never both start it. `devices_setting`: the
        run's RunConfig.devices, which its processes are pinned to (processes.launch_worker)."""
        run_dir = self._run_dir(run_id)
        # The lock makes check-then-launch atomic across threads and UI processes.
        with self.launch_lock():
            status = read_status(run_dir)
            if still is not None and not still(status):
                raise RunError(msg("run.already_started", run_id=run_id, state=status.get("state")))
            devices = status.get("devices") or []
            busy = self.busy_devices()
            taken = [d for d in devices if d in busy]
            if taken:
                raise RunError(msg("run.busy", devices=", ".join(taken), run_id=busy[taken[0]]))
            update_status(run_dir, state="queued", command=argv, pid=None, pgid=None, create_time=None,
                          launcher_create_time=None, worker_pid=None, stop_requested_at=None, stop_note=None,
                          **fields)
            try:
                child = processes.launch_worker(argv, run_dir, self.env, devices=devices_setting)
            except OSError as error:
                said = msg("run.launch_failed", run_id=run_id, error=error)
                update_status(run_dir, state="failed", ended_at=time.time(), **_said("error", said))
                announce_end(run_dir)
                raise RunError(said) from None
            self._children[run_id] = child
            started = processes.create_time(child.pid)
            update_status(run_dir, state="running", pid=child.pid, pgid=child.pid,
                          create_time=started, launcher_create_time=started, started_at=time.time())

    # --- stop, watch, delete ---------------------------------------------------
    def stop(self, run_id: str, grace_s: float = 30) -> Message:
        """Ask the worker to end; returns at once, with what it will do (stop_outcome). Before its first
        step it ends at once; after, it saves a checkpoint at the step's end and exits. After `grace_s`
        seconds a daemon thread SIGKILLs whatever is left (then the run is `stopped` at its last
        complete checkpoint)."""
        status = self.refresh(run_id)
        if not self._is_live(status):
            raise RunError(msg("run.not_running", run_id=run_id, state=status.get("state")))
        pid, started = _live_process(status)
        run_dir = self._run_dir(run_id)
        outcome = stop_outcome(status, list_checkpoints(run_dir), grace_s)
        # On disk before the signal: every store (another app process, another tab)
        # must know that a worker vanishing from now on was stopped, not lost.
        update_status(run_dir, stop_requested_at=time.time(),
                      stop_note=msg("run.note.unrecorded").to_dict())
        processes.request_stop(pid)

        def before_kill() -> None:
            update_status(run_dir, stop_note=msg("run.note.killed", grace_s=grace_s).to_dict())

        processes.escalate_later(pid, started, grace_s, self._children.get(run_id),
                                  before_kill, after_kill=lambda: self.refresh(run_id))
        return outcome

    def refresh(self, run_id: str) -> dict:
        """status.json of the run, after lost detection: a run marked queued
        (with a pid) or running whose process is gone, or whose pid now belongs
        to another program, becomes `lost` (or `failed` when we saw it exit
        with an error code)."""
        with self._refresh_lock:
            return self._refresh(run_id)

    def _refresh(self, run_id: str) -> dict:
        run_dir = self._run_dir(run_id)
        status = read_status(run_dir)
        child = self._children.get(run_id)
        if child is not None and child.poll() is not None:
            self._children.pop(run_id)  # reaped: no zombie left behind
        if status.get("state") not in ("queued", "running") or not status.get("pid"):
            return status
        if _alive(status):
            return status
        status = read_status(run_dir)  # the worker may have written its end just before exiting
        if status.get("state") in FINAL_STATES:
            return status
        exit_code = None
        if child is not None:  # gone: reap it now (a zombie exits at once) to learn how it ended
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=1)
            exit_code = child.returncode
        remove_stray_tmp(run_dir)
        if status.get("stop_requested_at"):
            # A message id (translated in the Runs tab); plain text from an older version as it is.
            note = Message.from_dict(status.get("stop_note")) or status.get("stop_note") or msg("run.note.stopped")
            return self._record_end(run_dir, status, state="stopped", exit_code=exit_code, ended_at=time.time(),
                                    **_said("advice", msg("run.stopped_advice", note=note, hint=self._resume_hint(run_dir))))
        return self._mark_gone(run_dir, status, exit_code)

    def _mark_gone(self, run_dir: Path, status: dict, exit_code: int | None) -> dict:
        if exit_code is not None and exit_code > 0:
            last = _last_line(run_dir / LOG_FILE)
            return self._record_end(run_dir, status, state="failed", exit_code=exit_code, ended_at=time.time(),
                                    **_said("error", last or msg("run.exited", code=exit_code)))
        # The group's leader: the launcher the store started, or under torchrun rank 0 (in a session of its own).
        leaders = {status.get("pid"): status.get("launcher_create_time") or status.get("create_time"),
                   status.get("worker_pid"): status.get("create_time")}
        processes.kill_leftovers(status.get("pgid"), status.get("launcher_create_time") or status.get("create_time"),
                                 leaders.get(status.get("pgid")))
        hint = self._resume_hint(run_dir)
        if exit_code == -signal.SIGKILL:  # unasked (a stop is handled above): most often the kernel's OOM killer
            return self._record_end(run_dir, status, state="lost", exit_code=exit_code, ended_at=time.time(),
                                    **self._killed_by_memory(run_dir, status, hint))
        error = (msg("run.lost_signal", pid=status["pid"], signal=-exit_code, hint=hint) if exit_code
                 else msg("run.lost", pid=status["pid"], hint=hint))
        return self._record_end(run_dir, status, state="lost", exit_code=exit_code, ended_at=time.time(),
                                **_said("error", error))

    def _killed_by_memory(self, run_dir: Path, status: dict, hint: Message) -> dict:
        """error + advice for a worker killed by SIGKILL: memory, the run's estimate, the settings to turn."""

        try:
            config = self._reader.config(run_dir)
            devices = self._resolve_devices(config)
        except RunError:
            return _said("error", msg("run.lost_oom", pid=status["pid"], estimate="", hint=hint))
        world = launch.processes_per_node(config, devices) * config.nnodes
        run = memory_advice.memory_of_run(config, self.workspace.models_dir, devices, status.get("precision"), world)
        estimate = memory_advice.estimate_sentence(run) if run else ""
        advice = memory_advice.oom_advice(run) if run else memory_advice.advice_without_estimate(config)
        return {**_said("error", msg("run.lost_oom", pid=status["pid"], estimate=estimate, hint=hint)),
                **_said("advice", advice)}

    def _record_end(self, run_dir: Path, seen: dict, **fields) -> dict:
        """Write the end of a vanished worker, unless another store (or the
        worker) already recorded one. When status.json cannot be written (a
        full disk), the end is still reported, from memory, with the reason."""
        def still_open(status: dict) -> bool:
            return status.get("state") in ("queued", "running") and status.get("pid") == seen.get("pid")

        try:
            status = update_status(run_dir, when=still_open, **fields)
        except OSError as error:
            return {**seen, **fields, "error": _unwritable_status(run_dir, error, fields)}
        if status.get("state") == fields["state"] and status.get("ended_at") == fields["ended_at"]:
            announce_end(run_dir)  # this store wrote the end: the workspace's webhook hears of it (notify.py)
        return status

    @staticmethod
    def _resume_hint(run_dir: Path) -> Message:
        checkpoints = list_checkpoints(run_dir)
        if checkpoints:
            return msg("run.hint.resume", checkpoint=checkpoints[-1].name)
        return msg("run.hint.restart")

    def reap(self) -> None:
        """Refresh the runs this store started, so a child that exited is reaped (no zombie) and its
        end recorded, even when nobody looks at the runs (the queue's scheduler calls this each tick)."""
        for run_id in list(self._children):
            with contextlib.suppress(RunError):
                self.refresh(run_id)

    def busy_devices(self) -> dict[str, str]:
        """Device id -> id of the live run that holds it."""
        busy = {}
        for run_dir in self._run_dirs():
            status = self.refresh(run_dir.name)
            if self._is_live(status):
                for device in status.get("devices") or []:
                    busy.setdefault(device, run_dir.name)
        return busy

    def delete(self, run_id: str) -> None:
        status = self.refresh(run_id)
        if self._is_live(status):
            raise RunError(msg("run.delete_running", run_id=run_id))
        run_dir = self._run_dir(run_id)
        shutil.rmtree(run_dir)
        self._reader.forget(run_dir)

    # --- reading ---------------------------------------------------------------
    def list(self) -> list[RunInfo]:
        """Every run of the workspace, newest first, refreshed from disk."""
        infos = [self.get(d.name) for d in self._run_dirs()]
        return sorted(infos, key=lambda i: (i.created_at or 0, i.run_id), reverse=True)

    def get(self, run_id: str) -> RunInfo:
        status = self.refresh(run_id)
        return self._reader.read(self._run_dir(run_id), status)

    # --- helpers ---------------------------------------------------------------
    def _run_dir(self, run_id: str) -> Path:
        run_dir = self.runs_dir / run_id
        if not is_plain_name(run_id) or not run_dir.is_dir():  # a run id is a folder name: never a path
            raise RunError(msg("run.unknown", run_id=run_id, folder=self.runs_dir))
        return run_dir

    def run_dirs(self) -> list[Path]:
        """Every run folder of the workspace (unordered)."""
        return self._run_dirs()

    def _run_dirs(self) -> list[Path]:
        if not self.runs_dir.is_dir():
            return []
        return [d for d in self.runs_dir.iterdir() if d.is_dir() and is_plain_name(d.name)
                and ((d / CONFIG_FILE).exists() or (d / "status.json").exists())]

    def _new_run_dir(self, config: RunConfig) -> Path:
        run_dir = new_run_dir(self.runs_dir, run_label(config))
        if run_dir is None:
            raise RunError(msg("run.no_folder", folder=self.runs_dir))
        return run_dir

    def devices_for(self, config: RunConfig) -> list[Device]:
        """The devices of this machine `config` trains on; RunError naming a device that is not here."""
        return self._resolve_devices(config)

    def _resolve_devices(self, config: RunConfig) -> list[Device]:
        if self._devices is None:
            self._devices = detect_devices()
        try:
            devices = training_devices(config.devices, self._devices)
            config.check_devices(devices)
            check_environment(config, devices, launch.processes_per_node(config, devices))
        except (ValueError, ConfigError) as error:
            raise RunError(message_of(error) or str(error)) from None
        return devices

    def _num_processes(self, config: RunConfig) -> int:
        return launch.processes_per_node(config, self._resolve_devices(config))

    @staticmethod
    def _is_live(status: dict) -> bool:
        return status.get("state") in ("queued", "running") and bool(status.get("pid"))

    @contextlib.contextmanager
    def launch_lock(self):
        """The workspace's launch lock (runs/.launch.lock): whoever holds it may check devices and
        start a run. Re-entrant in one thread, so the queue can decide and start under one hold."""
        depth = getattr(self._launch_depth, "n", 0)
        if depth:
            self._launch_depth.n = depth + 1
            try:
                yield
            finally:
                self._launch_depth.n = depth
            return
        with file_lock(self.runs_dir / ".launch.lock"):
            self._launch_depth.n = 1
            try:
                yield
            finally:
                self._launch_depth.n = 0


def _live_process(status: dict) -> tuple[int | None, float | None]:
    """(pid, create_time) of the run's process that still runs, or (None, None).
    The launcher (pid, launcher_create_time, ours) first; else the worker
    (worker_pid, create_time, which the worker records as its own): under
    torchrun, rank 0 can outlive a launcher that was killed alone."""
    candidates = [(status.get("pid"), status.get("launcher_create_time") or status.get("create_time")),
                  (status.get("worker_pid"), status.get("create_time"))]
    for pid, started in candidates:
        if pid and processes.is_alive(pid, started):
            return int(pid), float(started)
    return None, None


def run_label(config: RunConfig) -> str:
    """What a run's folder is named after, past its time: its run_name, else its method."""
    return clean_name(config.run_name or config.method, "run")


def stop_outcome(status: dict, checkpoints: list[Path], grace_s: float) -> Message:
    """What Stop does to a live run, as the worker will do it (backend/training/cli.py, StopRequest): before
    the first step of its process (`first_step_at`, written by GracefulStop, is older than this process's
    `worker_started_at` or absent) it ends at once without a checkpoint; after, it saves one when the step
    ends, killed after `grace_s` when the step takes longer."""
    first_step = status.get("first_step_at") or 0
    if not first_step or first_step < (status.get("worker_started_at") or 0):
        return msg("run.stop.ends_now")
    if checkpoints:
        return msg("run.stop.saves", grace_s=grace_s, checkpoint=checkpoints[-1].name)
    return msg("run.stop.saves_first", grace_s=grace_s)


def _not_started(status: dict) -> bool:
    """A run created (or waiting in the queue) whose worker was never launched."""
    return status.get("state") == "queued" and not status.get("pid")


def _alive(status: dict) -> bool:
    return _live_process(status)[0] is not None


def _unwritable_status(run_dir: Path, error: OSError, fields: dict) -> str:
    """The sentence for a run whose end cannot be written to status.json."""

    if error.errno == errno.EROFS:
        cause, fix = ("its filesystem is read-only (mounted read-only, or remounted so by the kernel after a disk "
                      "error)", "Check the disk and remount it read-write, then refresh")
    elif error.errno in (errno.ENOSPC, errno.EDQUOT):
        cause, fix = "the disk is full", "Free disk space, then refresh"
    else:
        cause, fix = f"it cannot be written ({error.strerror or error})", "Make the run folder writable, then refresh"
    ended = fields.get("error") or fields.get("advice") or ""
    return f"The worker ended, but its status.json cannot be updated: {cause} ({run_dir}). {fix}. {ended}".strip()


def _last_line(path: Path) -> str:
    lines = [line.strip() for line in tail_text(path, 4000).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _said(key: str, text: str | Message) -> dict:
    """status.json fields for `error` or `advice`: the English text, and its message id when it has one."""
    message = message_of(text)
    return {key: str(text), f"{key}_message": message.to_dict() if message else None}
