"""The Train tab's GPU picker and launch preview, as plain values (no gradio).

The picker lists the detected GPUs (name and memory), all ticked by default;
its ticks become RunConfig.devices ("auto" when all are ticked, else "0,2",
"cpu" when none), so the form, the YAML and the command line keep one setting.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from backend.config import RunConfig
from backend.models.hardware import Device, training_devices
from backend.scale.guards import SHARDED

Msg = Callable[..., str]


def gpus(devices: list[Device] | None) -> list[Device]:
    return [d for d in devices or [] if d.id.startswith("cuda:")]


def gpu_choices(devices: list[Device] | None) -> list[tuple[str, str]]:
    """(label, index) per detected GPU, e.g. ("0 · NVIDIA H200 · 139.8 GiB", "0")."""
    return [(f"{d.id.split(':')[1]} · {d.name} · {d.memory_gb:.1f} GiB", d.id.split(":")[1]) for d in gpus(devices)]


def picked_from_setting(setting: str, devices: list[Device] | None) -> list[str]:
    """The ticks for a devices setting: all GPUs for auto, none for cpu, else the listed ones."""
    indices = [index for _, index in gpu_choices(devices)]
    if setting == "auto":
        return indices
    if setting == "cpu":
        return []
    listed = [part.strip() for part in setting.split(",")]
    return [i for i in indices if i in listed]


def setting_from_picked(picked: list[str] | None, devices: list[Device] | None, current: str = "auto") -> str:
    """The devices setting for the ticks. Without GPUs the picker is empty and the setting stays as it is."""
    indices = [index for _, index in gpu_choices(devices)]
    if not indices:
        return current
    picked = [i for i in indices if i in (picked or [])]
    if not picked:
        return "cpu"
    return "auto" if picked == indices else ",".join(picked)


def world_size(config: RunConfig, devices: list[Device] | None) -> int:
    """Training processes of the whole run: Ray workers, else per node x nodes."""
    if config.ray_address:
        return config.ray_num_workers
    per_node = config.num_processes or len(gpus(_selected(config, devices))) or 1
    return per_node * config.nnodes


def _selected(config: RunConfig, devices: list[Device] | None) -> list[Device]:
    try:
        return training_devices(config.devices, devices) if devices else []
    except ValueError:
        return []


def launch_text(msg: Msg, config: RunConfig, devices: list[Device] | None) -> str:
    """One line under the picker: processes, engine, machines."""
    world = world_size(config, devices)
    how = "Ray Train" if config.ray_address else ("torchrun" if world > 1 or config.distributed in SHARDED else "python")
    return msg("train.scale.processes", world=world, nodes=config.nnodes, engine=config.distributed, how=how)


def command_text(argv: list[str], node_commands: list[list[str]], msg: Msg) -> str:
    """The command that starts the run here, then the one to paste on each other node."""
    lines = [shlex.join(argv)]
    for command in node_commands:
        rank = next((a.split("=", 1)[1] for a in command if a.startswith("--node-rank=")), "?")
        lines += ["", f"# {msg('train.scale.node_command', rank=rank)}", shlex.join(command)]
    return "\n".join(lines)
