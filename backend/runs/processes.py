"""Processes: launch detached (a worker's argv: backend/scale/launch.py), recognise, signal, reap.

The run store (backend/runs/store.py) decides *what* to do with a run; this module
knows *how* to do it to a process. Identity of a process (a training worker
or a background job, backend/runs/jobs.py) is (pid, create_time) as psutil
reports it, so a pid the kernel recycled for another program is never taken
for ours; a process whose start time is unknown is not ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from backend.config import RunConfig
from backend.models.hardware import launch_env
from backend.runs.files import CONFIG_FILE, LOG_FILE

REPO_ROOT = Path(__file__).resolve().parents[2]
# Two create_time readings of one process can differ by a whole second: psutil adds the ticks since boot
# to the kernel's boot time, a whole second (/proc/stat btime) that the kernel derives from the wall clock,
# so it steps by 1 when NTP's slewing carries the clock across a second. A reading against 0.05 s then
# took a live worker for a vanished one, and its leftovers' cleanup killed it (docs/LIBRARY_TRAPS.md).
# A recycled pid was started at another time: the kernel hands pids out in turn, and a pid comes round
# again only after all the others (32768 on many systems) were given out, never within a second.
SAME_PROCESS_TOLERANCE_S = 1.5


def repo_env(base: dict | None = None) -> dict:
    """The caller's environment plus the repo on PYTHONPATH (so `-m backend.X`
    imports from any working folder) and unbuffered output (a live log)."""
    env = dict(os.environ if base is None else base)
    parts = [str(REPO_ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def worker_env(base: dict | None = None, devices: str = "auto") -> dict:
    """repo_env, and an explicit `devices` list ("1,2") as CUDA_VISIBLE_DEVICES,
    so every rank's cuda:LOCAL_RANK is one of the chosen GPUs (hardware.launch_env)."""
    env = repo_env(base)
    try:
        pinned = launch_env(devices, env)
    except ValueError:
        pinned = {}  # a bad setting: the worker itself fails on it with the sentence to read
    for name, value in pinned.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def devices_setting(argv: list[str], run_dir: Path) -> str:
    """The `devices` of a run launched without its setting (by hand, by a test): config.yaml in
    the run folder, then any `--set devices=...` in argv (a resume may change it); "auto" when
    unreadable. The run store knows the setting and passes it to launch_worker instead."""

    setting = "auto"
    with contextlib.suppress(OSError, ValueError):
        setting = RunConfig.load(Path(run_dir) / CONFIG_FILE).devices
    for flag, value in zip(argv, argv[1:]):
        if flag == "--set" and value.partition("=")[0].strip() == "devices":
            setting = value.partition("=")[2].strip()
    return setting


def spawn_detached(argv: list[str], log_path: Path, env: dict, cwd: Path | None = None) -> subprocess.Popen:
    """Start `argv` detached: its own session and process group (a crash or
    restart of the UI does not take it down), stdin from /dev/null, stdout and
    stderr appended to `log_path`. A file, never a pipe: a full pipe nobody
    reads would stall the process. Training runs and background jobs alike;
    `cwd` None keeps the caller's folder (relative paths a user typed mean the same)."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env, cwd=cwd, close_fds=True)


def spawn_module(module: str, args: list[str], log_path: Path) -> subprocess.Popen:
    """`python -m module args` detached (spawn_detached) from the repository folder with repo_env:
    how the background jobs (jobs.py: evaluation, export, the speed probe, the API server) and the
    model's background build (backend/training/model_stage.py) start. A training worker starts
    through launch_worker, which pins its devices and keeps the caller's folder."""
    return spawn_detached([sys.executable, "-m", module, *args], log_path, repo_env(), cwd=REPO_ROOT)


def launch_worker(argv: list[str], run_dir: Path, env: dict | None = None, devices: str | None = None) -> subprocess.Popen:
    """Start the worker command `argv` detached, logging to the run's train.log, pinned to
    `devices` (the run's RunConfig.devices setting; None: read from the run folder)."""
    setting = devices_setting(argv, run_dir) if devices is None else devices
    return spawn_detached(argv, Path(run_dir) / LOG_FILE, worker_env(env, setting))


def create_time(pid: int) -> float | None:
    """psutil's start time of `pid`, or None when no such process runs."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def is_alive(pid: int | None, started: float | None) -> bool:
    """True when `pid` still is the process started at `started` and has not
    exited. A zombie (exited, not yet reaped) counts as gone."""
    if not pid or started is None:
        return False
    try:
        process = psutil.Process(int(pid))
        if abs(process.create_time() - float(started)) > SAME_PROCESS_TOLERANCE_S:
            return False  # the pid was recycled for another program
        return process.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def trainer_processes(pid: int) -> list[psutil.Process]:
    """The processes that run the training loop: the worker itself, or under
    torchrun its direct children (each rank, started by torchrun in a session
    of its own)."""
    try:
        process = psutil.Process(pid)
        children = process.children()
    except psutil.NoSuchProcess:
        return []
    launchers = ("torch.distributed.run", "backend.runs.torchrun")  # the second: torchrun for several nodes
    launched_torchrun = any(name in part for part in _cmdline(process) for name in launchers)
    return children if launched_torchrun and children else [process]


def request_stop(pid: int) -> int:
    """SIGTERM to the training processes; each saves a checkpoint at the next
    step boundary and exits. Sent to the processes, not their group: DataLoader
    worker processes share the group, and a SIGTERM to them makes the main
    loop raise instead of finishing its step. Returns how many were signalled."""
    count = 0
    for process in trainer_processes(pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGTERM)
            count += 1
    return count


def kill_tree(pid: int) -> None:
    """SIGKILL to the worker and everything below it, group by group (torchrun
    ranks run in sessions of their own, so the launcher's group alone would
    leave them orphaned and training)."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    groups = set()
    for process in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            groups.add(os.getpgid(process.pid))
    groups.discard(os.getpgrp())  # never our own group
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    for process in tree:  # any member that had left its group
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def kill_leftovers(pgid: int | None, since: float | None, leader_started: float | None) -> int:
    """SIGKILL what is left of a vanished worker's process group: helpers that
    outlived it (a local Ray instance's agents, DataLoader workers). Only a group
    one of the run's processes led, started at `leader_started` (None: none did; a
    worker typed into a shell script shares the script's group, whose other
    commands are not ours), only while its id still is that process's (once a
    group's last process is gone, the kernel may give the id to a new process,
    which then leads a group of that id), and only processes started after the
    run's first (`since`). Returns how many were killed."""
    if not pgid or since is None or leader_started is None or pgid == os.getpgrp():
        return 0
    holder = create_time(pgid)
    if holder is not None and abs(holder - leader_started) > SAME_PROCESS_TOLERANCE_S:
        return 0  # the id leads another program's group now
    killed = 0
    for process in psutil.process_iter(["create_time"]):
        with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError, PermissionError):
            if os.getpgid(process.pid) == pgid and (process.info["create_time"] or 0) >= since - SAME_PROCESS_TOLERANCE_S:
                process.kill()
                killed += 1
    return killed


def wait_gone(pid: int, started: float, timeout: float, child: subprocess.Popen | None = None) -> bool:
    """Wait up to `timeout` seconds for the worker to end (reaping it when it
    is our child). True when it is gone."""
    if child is not None:
        try:
            child.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    # Polled rather than psutil's wait(), which would reap (and so hide the
    # exit code from) a process that another Popen in this process owns.
    deadline = time.monotonic() + timeout
    while is_alive(pid, started):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def escalate_later(pid: int, started: float, grace_s: float, child: subprocess.Popen | None,
                   before_kill: Callable[[], None], after_kill: Callable[[], None]) -> threading.Thread:
    """After `grace_s` seconds, if the worker still runs: `before_kill()`, SIGKILL
    its tree, wait for it to go, `after_kill()`. A daemon thread, so stop() returns at once; it dies with
    the calling process (a UI restarted during the grace period does not
    escalate: the worker keeps stopping on its own or is killed by hand)."""
    def run() -> None:
        if wait_gone(pid, started, grace_s, child):
            return
        before_kill()
        kill_tree(pid)
        wait_gone(pid, started, 10.0, child)
        after_kill()

    thread = threading.Thread(target=run, name=f"escalate-stop-{pid}", daemon=True)
    thread.start()
    return thread


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
