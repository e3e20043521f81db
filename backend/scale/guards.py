"""Every refusal of a scale-out setting, in one place.

`check_config` needs the config only (RunConfig.validate calls it);
`check_environment` also looks at this machine: CUDA, installed packages,
the selected GPUs. Each raises ConfigError with one sentence that names the
fix; the worker turns it into exit code 2, the run store into a refusal.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

from backend.config import ConfigError

SHARDED = ("fsdp", "deepspeed_zero2", "deepspeed_zero3")
ZERO = ("deepspeed_zero2", "deepspeed_zero3")
DEEPSPEED_PIP = "pip install -r requirements-gpu.txt  (deepspeed, on a machine with CUDA and its compiler)"
RAY_PIP = "pip install 'ray[train]==2.60.0'"
RAY_ADDRESS = re.compile(r"^(local|auto|ray://[A-Za-z0-9._-]+(:\d{1,5})?|[A-Za-z0-9._-]+:\d{1,5})$")


def check_config(config) -> None:
    """Impossible combinations, told from the config alone."""
    _check_sharding(config)
    _check_nodes(config)
    _check_ray(config)


def engine(config) -> str:
    """The engine a run really uses: an own DeepSpeed file under `auto` is ZeRO as the file says."""
    if config.deepspeed and config.distributed == "auto":
        return "deepspeed_file"
    return config.distributed


def _check_sharding(config) -> None:
    d = config.distributed
    if config.cpu_offload and d not in ZERO:
        raise ConfigError(f"cpu_offload needs distributed deepspeed_zero2 or deepspeed_zero3 (now {d}); "
                          f"choose one of them or turn cpu_offload off.")
    if config.deepspeed:
        if d in ("ddp", "fsdp"):
            raise ConfigError(f"deepspeed = {config.deepspeed!r} is a DeepSpeed file, but distributed is {d}; "
                              f"choose distributed auto, deepspeed_zero2 or deepspeed_zero3, or clear deepspeed.")
        if config.cpu_offload:
            raise ConfigError(f"cpu_offload only shapes the generated DeepSpeed config; with your own file "
                              f"{config.deepspeed!r} set offload_optimizer there, or clear deepspeed.")
    if config.method == "qlora" and d in ("fsdp", "deepspeed_zero3"):
        raise ConfigError(f"QLoRA with {d} is not supported here: sharding a {config.quantization_bits}-bit base "
                          f"needs bnb_4bit_quant_storage equal to the compute dtype and a loader that keeps it; "
                          f"use qlora with deepspeed_zero2 or ddp, or method lora with {d}.")


def _check_nodes(config) -> None:
    if config.nnodes < 1:
        raise ConfigError(f"nnodes must be at least 1 (got {config.nnodes}).")
    if not 0 <= config.node_rank < config.nnodes:
        raise ConfigError(f"node_rank = {config.node_rank} is out of range for nnodes = {config.nnodes}: use 0 to "
                          f"{config.nnodes - 1} (0 is the machine that starts the run and hosts the rendezvous).")
    if not 1 <= config.master_port <= 65535:
        raise ConfigError(f"master_port must be a TCP port from 1 to 65535 (got {config.master_port}).")
    if config.node_join_timeout < 1:
        raise ConfigError(f"node_join_timeout must be at least 1 second (got {config.node_join_timeout}).")
    if config.nnodes > 1 and not (config.master_addr or "").strip():
        raise ConfigError(f"nnodes = {config.nnodes} needs master_addr: the address of node 0 that the other "
                          f"machines can reach (for a test on one machine: 127.0.0.1).")


def _check_ray(config) -> None:
    if config.ray_address == "":
        config.ray_address = None  # an empty box means "no Ray"
    if config.ray_num_workers < 1:
        raise ConfigError(f"ray_num_workers must be at least 1 (got {config.ray_num_workers}).")
    if config.ray_cpus_per_worker <= 0:
        raise ConfigError(f"ray_cpus_per_worker must be above 0 (got {config.ray_cpus_per_worker}).")
    if config.ray_address is None:
        return
    if not RAY_ADDRESS.match(config.ray_address.strip()):
        raise ConfigError(f"ray_address = {config.ray_address!r} is not a Ray address: use local, auto, "
                          f"ray://host:10001 or host:6379, or leave it empty for no Ray.")
    if config.nnodes > 1:
        raise ConfigError("Choose one way to use several machines: ray_address (Ray places the workers) or "
                          "nnodes (torchrun on each machine), not both; set nnodes to 1 or clear ray_address.")
    if config.num_processes:
        raise ConfigError("With ray_address the processes are Ray workers: set ray_num_workers and clear "
                          "num_processes.")
    if config.devices not in ("auto", "cpu"):
        raise ConfigError(f"With ray_address Ray hands each worker its GPU (ray_use_gpu); set devices to auto "
                          f"(now {config.devices!r}).")
    if config.devices == "cpu" and config.ray_use_gpu:
        raise ConfigError("devices = cpu and ray_use_gpu = true disagree: turn ray_use_gpu off or set devices to auto.")


def check_environment(config, devices: list | None = None, processes: int | None = None) -> None:
    """What this machine must have for the scale settings: packages, CUDA, enough GPUs.
    `devices`: the run's training devices (backend.hardware.training_devices);
    `processes`: training processes per node. Cheap when nothing is scaled."""
    kind = engine(config)
    if config.deepspeed:
        _check_deepspeed_file(config.deepspeed)
    if (kind in ZERO or kind == "deepspeed_file") and importlib.util.find_spec("deepspeed") is None:
        setting = f"deepspeed = {config.deepspeed!r}" if kind == "deepspeed_file" else f"distributed = {kind}"
        raise ConfigError(f"{setting} needs DeepSpeed, which is not installed: {DEEPSPEED_PIP}; "
                          f"or choose distributed fsdp or ddp.")
    if config.ray_address:
        check_ray_installed()
    if devices is None:
        return
    gpus = [d for d in devices if str(d.id).startswith("cuda:")]
    on_gpu = config.ray_use_gpu if config.ray_address else bool(gpus)
    if (kind in SHARDED or kind == "deepspeed_file") and not on_gpu:
        where = "Ray workers without GPUs (ray_use_gpu is off)" if config.ray_address else \
            f"the CPU (devices = {config.devices}, no CUDA GPU selected)"
        raise ConfigError(f"distributed = {config.distributed} needs CUDA GPUs, but this run trains on {where}: "
                          f"FSDP and DeepSpeed ZeRO are for models that do not fit one GPU; choose distributed "
                          f"auto or ddp here.")
    if config.ray_address == "local" and config.ray_use_gpu and not gpus:
        raise ConfigError("ray_use_gpu needs GPUs on this machine and none was found; turn ray_use_gpu off "
                          "(the workers train on the CPU) or use a Ray cluster that has GPUs.")
    if gpus and not config.ray_address and processes and processes > len(gpus):
        raise ConfigError(f"num_processes = {processes} is more than the {len(gpus)} selected GPU(s) "
                          f"({', '.join(d.id for d in gpus)}): one process per GPU; set num_processes to "
                          f"{len(gpus)} or less, or select more GPUs.")


def check_ray_installed() -> None:
    try:
        import ray.train  # noqa: F401  (the package and its Train extra)
    except ImportError as error:
        raise ConfigError(f"ray_address needs Ray Train, which is not installed ({error}): {RAY_PIP}; "
                          f"or clear ray_address.") from None


def _check_deepspeed_file(path: str) -> None:
    file = Path(path).expanduser()
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"deepspeed = {path!r}: no such file; give the path of your DeepSpeed JSON or "
                          f"clear deepspeed to use the generated config.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"deepspeed = {path!r} is not a readable JSON file ({error}); fix it or clear "
                          f"deepspeed.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"deepspeed = {path!r} must hold a JSON object (a DeepSpeed config).")


def scaled(config) -> bool:
    """Whether any scale-out setting is in use (else nothing here needs torch)."""
    return (config.distributed not in ("auto", "ddp") or bool(config.deepspeed) or bool(config.ray_address)
            or config.nnodes > 1 or config.cpu_offload)


def check_worker(config) -> None:
    """check_environment as a worker process sees it: its own devices, and under
    torchrun its node's process count (LOCAL_WORLD_SIZE)."""
    if not scaled(config):
        return
    from backend.hardware import Device, training_devices

    check_environment(config)  # packages and files first: no torch import needed for those
    if config.devices == "cpu":
        devices = [Device("cpu", "CPU", 0.0, False, False)]
    else:
        try:
            devices = training_devices(config.devices)  # imports torch
        except ValueError as error:
            raise ConfigError(str(error)) from None
    processes = int(os.environ.get("LOCAL_WORLD_SIZE") or config.num_processes or 0) or None
    check_environment(config, devices, processes)
