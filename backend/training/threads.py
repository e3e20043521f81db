"""CPU threads of a worker process.

torch starts one intra-op thread per core in every process. Two training
processes on two cores (DDP ranks, or a run beside the app, the test suite or
another run) then run four spinning OpenMP threads on two cores, and each
step gets several times slower than with one thread each. So a worker takes
its share: the CPUs it may use, divided by the training processes on this
machine, and no more than the cores idle when it starts.

"Idle" is measured, over half a second, from the kernel's CPU times of the
CPUs this process may run on. The 1-minute load average lags a minute behind:
just after another process ended it still read above 0.5 on an idle 2-core
machine, and the run took 1 thread of 2 (bench/threads_under_load.py times 1
against 2 threads at loads 0-4). An explicit OMP_NUM_THREADS is the user's
choice and is kept.

Two workers started in the same half second both saw 2.0 idle CPUs and took 2 threads each, 4 on 2
cores: about 18 s a step against 2-3 s alone. So each worker also records the threads it took, in a
file per process under the machine's temporary folder (`claims_dir`), and a newcomer counts those of
the live workers as taken, under a lock; a worker whose share others now claim gives threads back
between steps (ThreadRebalance), and takes them again when they end.
"""

from __future__ import annotations

import atexit
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from backend.runs.processes import SAME_PROCESS_TOLERANCE_S
from backend.storage.file_lock import file_lock

log = logging.getLogger("backend.train")
SAMPLE_S = 0.5  # long enough to see a busy process, short beside a model load
REBALANCE_EVERY_S = 20.0  # a worker looks at the others' claims between steps at most this often


def claims_dir() -> Path:
    """Where the live workers of this user record their threads: one file per process, "START THREADS"."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"finetune-studio-threads-{uid}"


def claimed_by_others(folder: Path | None = None) -> int:
    """Threads that other live workers took (a claim whose process ended, or whose pid was reused
    by a later process, counts nothing and is removed)."""
    folder = folder or claims_dir()
    total = 0
    for claim in folder.glob("[0-9]*"):
        if not claim.name.isdigit() or int(claim.name) == os.getpid():
            continue
        pid = int(claim.name)
        try:
            started, threads = claim.read_text().split()
            alive = abs(psutil.Process(pid).create_time() - float(started)) <= SAME_PROCESS_TOLERANCE_S
        except (OSError, ValueError, psutil.Error):
            alive = False
        if alive:
            total += int(threads)
        else:
            claim.unlink(missing_ok=True)
    return total


def _record_claim(threads: int, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    claim = folder / str(os.getpid())
    if not claim.exists():
        atexit.register(claim.unlink, missing_ok=True)
    claim.write_text(f"{psutil.Process().create_time()} {threads}")


def thread_share(cpus: int, local_processes: int, idle: float) -> int:
    """Threads for one of `local_processes` workers on `cpus` CPUs of which `idle` are idle now
    (a fraction counts from one half: 1.5 idle CPUs take 2 threads, 1.4 take 1)."""
    share = max(1, cpus // max(1, local_processes))
    return max(1, min(share, int(idle + 0.5)))


def usable_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def idle_cpus(cpus: list[int], sample_s: float = SAMPLE_S) -> float:
    """How many of `cpus` were idle over the last `sample_s` seconds (this process sleeps meanwhile)."""
    busy = psutil.cpu_percent(interval=sample_s, percpu=True)
    return sum(1.0 - busy[cpu] / 100.0 for cpu in cpus if cpu < len(busy))


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    cpus: int
    idle: float          # CPUs idle over the sample; -1 when OMP_NUM_THREADS decided
    processes: int       # training processes on this machine (LOCAL_WORLD_SIZE)
    claimed: int = 0     # threads other live workers took

    def __str__(self) -> str:
        if self.idle < 0:
            return f"{self.threads} CPU thread(s): OMP_NUM_THREADS={self.threads}"
        others = f", {self.claimed} taken by other runs" if self.claimed else ""
        return (f"{self.threads} CPU thread(s): {self.cpus} CPUs, {self.idle:.1f} idle now{others}, "
                f"{self.processes} training process(es) here")


def choose_threads(folder: Path | None = None) -> ThreadChoice:
    """Threads for a worker starting now, without touching torch: the Plan shows the same choice."""
    cpus = usable_cpus()
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return ThreadChoice(max(1, int(os.environ["OMP_NUM_THREADS"])), len(cpus), -1.0, processes)
    idle = idle_cpus(cpus)
    claimed = claimed_by_others(folder)
    free = min(idle, max(0.0, len(cpus) - claimed))  # a worker still loading its model is not busy yet
    return ThreadChoice(thread_share(len(cpus), processes, free), len(cpus), idle, processes, claimed)


def limit_threads(folder: Path | None = None) -> int:
    """Set torch's intra-op threads for this worker and record the claim; returns the number."""
    import torch

    if os.environ.get("OMP_NUM_THREADS"):
        return torch.get_num_threads()
    folder = folder or claims_dir()
    with file_lock(folder / ".lock"):  # two workers starting together choose one after the other
        choice = choose_threads(folder)
        _record_claim(choice.threads, folder)
    torch.set_num_threads(choice.threads)
    log.info("%s", choice)
    return choice.threads


class ThreadRebalance:
    """Between steps, at most every REBALANCE_EVERY_S: give threads back when the live workers' claims
    and this one's add up to more than the CPUs, and take them again (up to the share chosen at the
    start) when the others end. A no-op when OMP_NUM_THREADS decided."""

    def __init__(self, folder: Path | None = None, every_s: float = REBALANCE_EVERY_S):
        self.folder = folder or claims_dir()
        self.every_s = every_s
        self.fixed = bool(os.environ.get("OMP_NUM_THREADS"))
        self.ceiling: int | None = None
        self.last = time.monotonic()

    def maybe(self) -> int | None:
        """The new thread count when it changed, else None."""
        if self.fixed or time.monotonic() - self.last < self.every_s:
            return None
        self.last = time.monotonic()
        import torch

        current = torch.get_num_threads()
        self.ceiling = self.ceiling or current
        wanted = max(1, min(self.ceiling, len(usable_cpus()) - claimed_by_others(self.folder)))
        if wanted == current:
            return None
        torch.set_num_threads(wanted)
        _record_claim(wanted, self.folder)
        log.info("%d CPU thread(s) now, %d before: other runs' claims changed", wanted, current)
        return wanted
