"""What the machine can train on. Imports torch lazily: the UI calls this
after the page is up, never on the start-up path."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Device:
    id: str                 # "cpu" or "cuda:<index>"
    name: str
    memory_gb: float        # total memory of the device (GiB); system RAM for the CPU
    supports_bf16: bool
    supports_fp16: bool


def detect_devices() -> list[Device]:
    """Every CUDA device, then the CPU (always last, always present)."""
    import psutil
    import torch

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
    devices.append(Device(
        id="cpu",
        name="CPU",
        memory_gb=round(psutil.virtual_memory().total / 2**30, 2),
        # The Trainer's mixed precision needs CUDA; on the CPU it trains in fp32.
        supports_bf16=False,
        supports_fp16=False,
    ))
    return devices


def training_devices(devices_setting: str, devices: list[Device] | None = None) -> list[Device]:
    """The devices a run with `devices` = "auto" | "cpu" | "0,1" trains on."""
    devices = devices if devices is not None else detect_devices()
    gpus = [d for d in devices if d.id.startswith("cuda:")]
    cpu = [d for d in devices if d.id == "cpu"]
    if devices_setting == "cpu":
        return cpu
    if devices_setting == "auto":
        return gpus or cpu
    wanted = [f"cuda:{part.strip()}" for part in devices_setting.split(",") if part.strip()]
    known = {d.id: d for d in gpus}
    missing = [w for w in wanted if w not in known]
    if missing:
        have = ", ".join(known) or "none"
        raise ValueError(f"devices={devices_setting!r}: no such GPU {', '.join(missing)} (GPUs here: {have}).")
    return [known[w] for w in wanted]


def resolve_precision(precision: str, devices: list[Device]) -> str:
    """`auto` → bf16 where every device supports it, else fp16 on a GPU, else fp32."""
    if precision != "auto":
        return precision
    if devices and all(d.supports_bf16 for d in devices):
        return "bf16"
    if devices and all(d.id.startswith("cuda:") for d in devices):
        return "fp16"
    return "fp32"


def as_dicts(devices: list[Device]) -> list[dict]:
    return [asdict(d) for d in devices]
