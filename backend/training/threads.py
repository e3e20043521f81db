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
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import psutil

log = logging.getLogger("backend.train")
SAMPLE_S = 0.5  # long enough to see a busy process, short beside a model load


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

    def __str__(self) -> str:
        if self.idle < 0:
            return f"{self.threads} CPU thread(s): OMP_NUM_THREADS={self.threads}"
        return (f"{self.threads} CPU thread(s): {self.cpus} CPUs, {self.idle:.1f} idle now, "
                f"{self.processes} training process(es) here")


def choose_threads() -> ThreadChoice:
    """Threads for a worker starting now, without touching torch: the Plan shows the same choice."""
    cpus = usable_cpus()
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return ThreadChoice(max(1, int(os.environ["OMP_NUM_THREADS"])), len(cpus), -1.0, processes)
    idle = idle_cpus(cpus)
    return ThreadChoice(thread_share(len(cpus), processes, idle), len(cpus), idle, processes)


def limit_threads() -> int:
    """Set torch's intra-op threads for this worker; returns the number."""
    import torch

    if os.environ.get("OMP_NUM_THREADS"):
        return torch.get_num_threads()
    choice = choose_threads()
    torch.set_num_threads(choice.threads)
    log.info("%s", choice)
    return choice.threads
