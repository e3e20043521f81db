"""Every scale-out rule that reads more than one setting (or the machine), in one place.

`check_config` needs the config only (RunConfig.validate calls it, after each
number was checked against its field's own bounds);
`check_environment` also looks at this machine: CUDA, installed packages,
the selected GPUs. Each raises ConfigError with one sentence that names the
fix; the worker turns it into exit code 2, the run store into a refusal.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
from pathlib import Path

from backend.config_policy import ConfigError
from backend.messages import msg
from backend.models.hardware import Device, training_devices

SHARDED = ("fsdp", "deepspeed_zero2", "deepspeed_zero3")
ZERO = ("deepspeed_zero2", "deepspeed_zero3")
DEEPSPEED_PIP = "pip install -r requirements-gpu.txt  (deepspeed, on a machine with CUDA and its compiler)"
RAY_PIP = "pip install 'ray[train]==2.60.0'"
RAY_ADDRESS = re.compile(r"^(local|auto|ray://[A-Za-z0-9._-]+(:\d{1,5})?|[A-Za-z0-9._-]+:\d{1,5})$")
RAY_CLIENT_PORT = 10001  # ray://host without a port: Ray Client's default
PROBE_S = 5  # seconds to wait for a Ray head to accept a connection


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
        raise ConfigError(msg("scale.offload_needs_zero", distributed=d))
    if config.deepspeed:
        if d in ("ddp", "fsdp"):
            raise ConfigError(msg("scale.file_engine", path=config.deepspeed, distributed=d))
        if config.cpu_offload:
            raise ConfigError(msg("scale.offload_own_file", path=config.deepspeed))
    if config.method == "qlora" and d in ("fsdp", "deepspeed_zero3"):
        raise ConfigError(msg("scale.qlora_sharded", distributed=d, bits=config.quantization_bits))


def _check_nodes(config) -> None:
    # nnodes, master_port and node_join_timeout alone: their bounds (RunConfig field metadata).
    if not 0 <= config.node_rank < config.nnodes:
        raise ConfigError(msg("scale.node_rank", rank=config.node_rank, nnodes=config.nnodes, last=config.nnodes - 1))
    if config.nnodes > 1 and not (config.master_addr or "").strip():
        raise ConfigError(msg("scale.master_addr", nnodes=config.nnodes))


def _check_ray(config) -> None:
    if config.ray_address == "":
        config.ray_address = None  # an empty box means "no Ray"
    if config.ray_address is None:
        return
    if not RAY_ADDRESS.match(config.ray_address.strip()):
        raise ConfigError(msg("scale.ray_address", address=config.ray_address))
    if config.nnodes > 1:
        raise ConfigError(msg("scale.ray_and_nodes"))
    if config.num_processes:
        raise ConfigError(msg("scale.ray_processes"))
    if config.devices not in ("auto", "cpu"):
        raise ConfigError(msg("scale.ray_devices", devices=config.devices))
    if config.devices == "cpu" and config.ray_use_gpu:
        raise ConfigError(msg("scale.ray_cpu_gpu"))


def check_environment(config, devices: list | None = None, processes: int | None = None) -> None:
    """What this machine must have for the scale settings: packages, CUDA, enough GPUs.
    `devices`: the run's training devices (backend.models.hardware.training_devices);
    `processes`: training processes per node. Cheap when nothing is scaled."""
    kind = engine(config)
    if config.deepspeed:
        _check_deepspeed_file(config.deepspeed)
    if (kind in ZERO or kind == "deepspeed_file") and importlib.util.find_spec("deepspeed") is None:
        setting = f"deepspeed = {config.deepspeed!r}" if kind == "deepspeed_file" else f"distributed = {kind}"
        raise ConfigError(msg("scale.deepspeed_missing", setting=setting, pip=DEEPSPEED_PIP))
    if config.ray_address:
        check_ray_installed()
    if devices is None:
        return
    gpus = [d for d in devices if str(d.id).startswith("cuda:")]
    on_gpu = config.ray_use_gpu if config.ray_address else bool(gpus)
    if (kind in SHARDED or kind == "deepspeed_file") and not on_gpu:
        if config.ray_address:
            raise ConfigError(msg("scale.needs_cuda_ray", distributed=config.distributed))
        raise ConfigError(msg("scale.needs_cuda", distributed=config.distributed, devices=config.devices))
    if config.ray_address == "local" and config.ray_use_gpu and not gpus:
        raise ConfigError(msg("scale.ray_gpu_missing"))
    if gpus and not config.ray_address and processes and processes > len(gpus):
        raise ConfigError(msg("scale.too_many_processes", processes=processes, gpus=len(gpus),
                              ids=", ".join(d.id for d in gpus)))


def check_ray_installed() -> None:
    try:
        import ray.train  # noqa: F401  (the package and its Train extra)
    except ImportError as error:
        raise ConfigError(msg("scale.ray_missing", error=str(error), pip=RAY_PIP)) from None


def check_ray_cluster(address: str) -> None:
    """A cluster must answer at `address` before the driver starts: ray.init raises a
    ConnectionError for `auto` with no cluster, and on a host:port where nothing listens it
    retries for minutes. `local` starts its own instance and needs nothing running."""
    address = address.strip()
    if address == "local":
        return
    if address == "auto":
        from ray._private.services import get_ray_address_from_environment  # what ray.init(address="auto") asks

        try:
            get_ray_address_from_environment("auto", None)  # RAY_ADDRESS, the last `ray start`, a running head
        except ConnectionError:
            raise ConfigError(msg("scale.ray_none_running")) from None
        return
    host, _, port = address.removeprefix("ray://").partition(":")
    try:
        socket.create_connection((host, int(port or RAY_CLIENT_PORT)), timeout=PROBE_S).close()
    except OSError as error:
        raise ConfigError(msg("scale.ray_unreachable", address=address, error=error.strerror or str(error))) from None


def _check_deepspeed_file(path: str) -> None:
    file = Path(path).expanduser()
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(msg("scale.file_missing", path=path)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(msg("scale.file_bad", path=path, error=str(error))) from None
    if not isinstance(data, dict):
        raise ConfigError(msg("scale.file_not_object", path=path))


def scaled(config) -> bool:
    """Whether any scale-out setting is in use (else nothing here needs torch)."""
    return (config.distributed not in ("auto", "ddp") or bool(config.deepspeed) or bool(config.ray_address)
            or config.nnodes > 1 or config.cpu_offload)


def check_worker(config) -> None:
    """check_environment as a worker process sees it: its own devices, and under
    torchrun its node's process count (LOCAL_WORLD_SIZE)."""
    if not scaled(config):
        return

    check_environment(config)  # packages and files first: no torch import needed for those
    if config.ray_address:
        check_ray_cluster(config.ray_address)  # here, not in the UI: the driver is the one that connects
    if config.devices == "cpu":
        devices = [Device("cpu", "CPU", 0.0, False, False)]
    else:
        try:
            devices = training_devices(config.devices)  # imports torch
        except ValueError as error:
            raise ConfigError(str(error)) from None
    processes = int(os.environ.get("LOCAL_WORLD_SIZE") or config.num_processes or 0) or None
    check_environment(config, devices, processes)
