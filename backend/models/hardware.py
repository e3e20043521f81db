"""What the machine can train on. Imports torch lazily, and only where a GPU driver is present: the UI
calls this after the page is up, never on the start-up path."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import psutil

from backend.messages import UserError, msg

# Set by the launcher next to CUDA_VISIBLE_DEVICES: the GPU indices as the user
# chose them (machine-wide). The worker sees those GPUs as cuda:0..N-1.
LAUNCHED_DEVICES_ENV = "FINETUNE_STUDIO_DEVICES"


@dataclass(frozen=True)
class Device:
    id: str                 # "cpu" or "cuda:<index>"
    name: str
    memory_gb: float        # total memory of the device (GiB); system RAM for the CPU
    supports_bf16: bool
    supports_fp16: bool


# Device nodes of the GPU drivers torch.cuda reaches (NVIDIA's, ROCm's, WSL's). Without any of them
# torch sees no GPU, so a CPU machine knows its devices without importing torch (seconds of CPU).
GPU_DRIVER_NODES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")


def gpu_driver_present() -> bool:
    return sys.platform != "linux" or any(os.path.exists(node) for node in GPU_DRIVER_NODES)


def detect_devices() -> list[Device]:
    """Every CUDA device, then the CPU (always last, always present)."""

    devices = []
    if gpu_driver_present():
        import torch

        devices += _cuda_devices(torch)
    devices.append(Device(
        id="cpu",
        name="CPU",
        memory_gb=round(psutil.virtual_memory().total / 2**30, 2),
        # The Trainer's bf16 on the CPU is torch's CPU autocast; it pays only where the CPU
        # multiplies bf16 natively (AVX512-BF16, AMX), and elsewhere it is slower than fp32.
        supports_bf16=cpu_supports_bf16(),
        supports_fp16=False,
    ))
    return devices


def device_problems(device: str) -> list[str]:
    """Why `--device` (cpu or cuda:N) of the chat and serve command lines cannot be used here; [] if it can."""
    if device == "cpu":
        return []
    if not device.startswith("cuda:") or not device[5:].isdigit():
        return [f"--device {device!r} is not a device: use cpu or cuda:N."]
    gpus = [d for d in detect_devices() if d.id.startswith("cuda:")]
    if int(device[5:]) >= len(gpus):
        return [f"--device {device} is not present on this machine ({len(gpus)} GPU(s)); use --device cpu."]
    return []


def _cuda_devices(torch) -> list[Device]:
    devices = []
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            devices.append(Device(
                id=f"cuda:{index}",
                name=props.name,
                memory_gb=round(props.total_memory / 2**30, 2),
                supports_bf16=torch.cuda.is_bf16_supported() if index == 0 else props.major >= 8,
                supports_fp16=True,
            ))
    return devices


class DeviceChoiceError(UserError, ValueError):
    """A `devices` setting this machine cannot honour; the message is catalogued (backend/messages.py)."""


def explicit_indices(devices_setting: str) -> list[int] | None:
    """The GPU indices of "0,1"; None for "auto" / "cpu" (no explicit choice)."""
    if devices_setting in ("auto", "cpu"):
        return None
    parts = [part.strip() for part in devices_setting.split(",") if part.strip()]
    if not parts or not all(part.isdigit() for part in parts):
        raise DeviceChoiceError(msg("devices.syntax", setting=devices_setting))
    return [int(part) for part in parts]


def launch_env(devices_setting: str, env: Mapping[str, str]) -> dict[str, str | None]:
    """Variables for a worker that trains on `devices_setting`, started from a
    process with environment `env` (None: remove the variable). An explicit
    list becomes CUDA_VISIBLE_DEVICES, mapped through the launcher's own
    CUDA_VISIBLE_DEVICES when it has one (its indices are relative to it)."""
    wanted = explicit_indices(devices_setting)
    if wanted is None:
        return {LAUNCHED_DEVICES_ENV: None}
    visible = _split(env.get("CUDA_VISIBLE_DEVICES"))
    if visible is not None:
        outside = [i for i in wanted if i >= len(visible)]
        if outside:
            raise DeviceChoiceError(msg("devices.not_visible", setting=devices_setting, count=len(visible),
                                        visible=env["CUDA_VISIBLE_DEVICES"]))
    chosen = [visible[i] if visible is not None else str(i) for i in wanted]
    return {"CUDA_VISIBLE_DEVICES": ",".join(chosen), LAUNCHED_DEVICES_ENV: ",".join(map(str, wanted))}


def local_indices(devices_setting: str, env: Mapping[str, str]) -> list[int] | None:
    """The CUDA indices this process uses for `devices_setting`: under a
    launcher that set CUDA_VISIBLE_DEVICES (LAUNCHED_DEVICES_ENV present) the
    chosen GPUs are cuda:0..N-1, in the launched order; else the indices as given."""
    wanted = explicit_indices(devices_setting)
    launched = _split(env.get(LAUNCHED_DEVICES_ENV))
    if wanted is None or launched is None:
        return wanted
    launched_ints = [int(part) for part in launched]
    missing = [i for i in wanted if i not in launched_ints]
    if missing:
        raise DeviceChoiceError(msg("devices.not_launched", setting=devices_setting, missing=", ".join(map(str, missing)),
                                    launched=",".join(launched)))
    return [launched_ints.index(i) for i in wanted]


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def training_devices(devices_setting: str, devices: list[Device] | None = None,
                     env: Mapping[str, str] | None = None) -> list[Device]:
    """The devices a run with `devices` = "auto" | "cpu" | "0,1" trains on, as
    this process sees them (see local_indices: under the launcher "1,2" is cuda:0, cuda:1)."""
    devices = devices if devices is not None else detect_devices()
    gpus = [d for d in devices if d.id.startswith("cuda:")]
    cpu = [d for d in devices if d.id == "cpu"]
    if devices_setting == "cpu":
        return cpu
    if devices_setting == "auto":
        return gpus or cpu
    wanted = explicit_indices(devices_setting)
    local = local_indices(devices_setting, os.environ if env is None else env)
    known = {d.id: d for d in gpus}
    missing = [f"cuda:{w}" for w, i in zip(wanted, local) if f"cuda:{i}" not in known]
    if missing:
        have = ", ".join(known) or "none"
        raise DeviceChoiceError(msg("devices.no_such_gpu", setting=devices_setting, missing=", ".join(missing), have=have))
    return [known[f"cuda:{i}"] for i in local]


def resolve_precision(precision: str, devices: list[Device]) -> str:
    """`auto` → bf16 on GPUs that support it, else fp16 on GPUs; fp32 on the CPU.

    On the CPU bf16 is a choice, not the default: fp32 keeps CPU runs exact and
    reproducible (the tests' and the demo's numbers), and bf16 needs a CPU that
    multiplies it natively (docs/BENCHMARKS.md, "bf16 on the CPU")."""
    if precision != "auto":
        return precision
    if any(d.id == "cpu" for d in devices):
        return "fp32"
    if devices and all(d.supports_bf16 for d in devices):
        return "bf16"
    if devices and all(d.id.startswith("cuda:") for d in devices):
        return "fp16"
    return "fp32"


# The CPU flags torch's own probes (torch.cpu._is_avx512_bf16_supported, _is_amx_tile_supported) test.
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_tile"})


def cpu_supports_bf16() -> bool:
    """True where the CPU multiplies bf16 natively (AVX512-BF16 or AMX tiles). On Linux read from the
    kernel's CPU flags, which is what the probes see, without importing torch."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), None)
    except OSError:
        flags = None
    if flags is not None:
        return bool(BF16_CPU_FLAGS & set(flags))
    import torch

    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def as_dicts(devices: list[Device]) -> list[dict]:
    return [asdict(d) for d in devices]
