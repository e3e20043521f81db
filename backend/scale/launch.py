"""The argv that starts a run, for every way of running it.

    one process           python -m backend.train ARGS
    several, one machine  python -m torch.distributed.run --standalone --nproc-per-node=N -m backend.train ARGS
    several machines      python -m backend.runs.torchrun --nnodes=M --node-rank=K ... -m backend.train ARGS
    Ray Train             python -m backend.train ARGS   (the driver; Ray starts the workers)

FSDP and ZeRO go through torchrun even on one GPU (a process group of one).
Several machines use torchrun's static rendezvous on node 0's
master_addr:master_port; every node runs the same argv but its --node-rank,
and the run folder must be on a filesystem all of them share (docs/SCALE.md).
"""

from __future__ import annotations

import sys

from backend.scale.engines import uses_torchrun

WORKER_MODULE = "backend.train"
NODES_MODULE = "backend.runs.torchrun"


def processes_per_node(config, devices: list) -> int:
    """Training processes this machine starts: num_processes, else one per
    selected GPU, else one (on the CPU). A Ray run starts only its driver here."""
    if config.ray_address:
        return 1
    if config.num_processes:
        return config.num_processes
    gpus = [d for d in devices if str(d.id).startswith("cuda:")]
    return len(gpus) or 1


def held_devices(config, devices: list) -> list[str]:
    """The devices of this machine a run holds (one job per device set): none for a
    Ray cluster elsewhere, whose workers run on its own machines."""
    if config.ray_address and config.ray_address != "local":
        return []
    return [d.id for d in devices]


def worker_command(worker_args: list[str], config, processes: int, node_rank: int | None = None) -> list[str]:
    """argv of the run on one machine (node `node_rank`, default the config's)."""
    if config.ray_address:
        return [sys.executable, "-m", WORKER_MODULE, *worker_args]
    if config.nnodes > 1:
        rank = config.node_rank if node_rank is None else node_rank
        return [sys.executable, "-m", NODES_MODULE, f"--nnodes={config.nnodes}", f"--node-rank={rank}",
                f"--nproc-per-node={processes}", f"--master-addr={config.master_addr}",
                f"--master-port={config.master_port}", f"--rdzv-conf=timeout={config.node_join_timeout}",
                "-m", WORKER_MODULE, *worker_args]
    if uses_torchrun(config, processes):
        # --standalone: torchrun picks a free rendezvous port, so runs on different GPUs never collide.
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
                "-m", WORKER_MODULE, *worker_args]
    return [sys.executable, "-m", WORKER_MODULE, *worker_args]


def other_node_commands(worker_args: list[str], config, processes: int) -> list[list[str]]:
    """The argv to paste on each other machine of a several-node run (none otherwise)."""
    if config.nnodes <= 1 or config.ray_address:
        return []
    return [worker_command(worker_args, config, processes, rank)
            for rank in range(config.nnodes) if rank != config.node_rank]
