"""CPU threads of a worker process.

torch starts one intra-op thread per core in every process. Two training
processes on two cores (DDP ranks, or a run beside the app, the test suite or
another run) then run four spinning OpenMP threads on two cores, and each
step gets several times slower than with one thread each. So a worker takes
its share: the CPUs it may use, divided by the training processes on this
machine, and no more than the cores idle when it starts. An explicit
OMP_NUM_THREADS is the user's choice and is kept.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("backend.train")


def thread_share(cpus: int, local_processes: int, load: float) -> int:
    """Threads for one of `local_processes` workers on `cpus` CPUs with `load`
    runnable processes already there (the 1-minute load average)."""
    share = max(1, cpus // max(1, local_processes))
    idle = max(1, round(cpus - load))
    return max(1, min(share, idle))


def limit_threads() -> int:
    """Set torch's intra-op threads for this worker; returns the number."""
    import torch

    if os.environ.get("OMP_NUM_THREADS"):
        return torch.get_num_threads()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    threads = thread_share(cpus, processes, load)
    torch.set_num_threads(threads)
    log.info("%d CPU thread(s): %d CPUs, %d training process(es) here, load %.1f", threads, cpus, processes, load)
    return threads
