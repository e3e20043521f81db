"""What to change when a run does not fit in memory, each change with the estimate it gives.

The Train tab's Plan asks when the estimate says a run does not fit its
device; the worker (an allocator failure) and the run store (a worker killed
by signal 9, what the kernel's out-of-memory killer sends) ask when a run ran
out of memory. Only settings that are not already on are named: gradient
checkpointing, QLoRA 4-bit, a smaller batch (with more accumulation, so the
effective batch stays) and a shorter cutoff. Pure arithmetic over
backend/models/memory.py, no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from backend.config_policy import ConfigError
from backend.messages import Message, msg
from backend.models.memory import (
    HEADROOM,
    Architecture,
    MemoryEstimate,
    architecture_for,
    choose_checkpointing,
    config_estimate_kwargs,
    estimate_memory,
    shard,
)

# A shorter cutoff than this is no longer a fine-tuning of conversations (tokens).
MIN_CUTOFF = 64


@dataclass(frozen=True)
class RunMemory:
    """A run as the estimate sees it: the architecture, estimate_memory's settings
    (gradient_checkpointing resolved the way the worker resolves "auto") and the
    device that decides (the smallest one the run trains on)."""
    arch: Architecture
    settings: dict
    device_name: str
    device_gb: float
    sharding: dict = field(default_factory=dict)  # shard()'s distributed / world_size / cpu_offload / precision

    def estimate(self, **changes) -> MemoryEstimate:
        estimate = estimate_memory(self.arch, **{**self.settings, **changes})
        if self.sharding:
            estimate = shard(estimate, self.arch, **self.sharding)
        return estimate

    @property
    def limit_gb(self) -> float:
        """The most a run may need and still fit (the verdict keeps HEADROOM free)."""
        return self.device_gb * (1 - HEADROOM)

    def with_settings(self, **changes) -> RunMemory:
        return replace(self, settings={**self.settings, **changes})


def run_memory(config, arch: Architecture, device, precision: str, world_size: int = 1,
               row_tokens: float | None = None) -> RunMemory:
    """RunMemory of a RunConfig on `device` (a backend.models.hardware.Device) in `precision`;
    `row_tokens`: the tokens a row of a step takes in the run's data (None: cutoff_len)."""
    kind = "cpu" if device.id == "cpu" else "cuda"
    settings = config_estimate_kwargs(config, precision, kind, row_tokens)
    checkpointing, _ = choose_checkpointing(config.gradient_checkpointing, device.memory_gb, arch=arch, **settings)
    sharding = dict(distributed=config.distributed, world_size=world_size, cpu_offload=config.cpu_offload,
                    precision=precision)
    return RunMemory(arch, {**settings, "gradient_checkpointing": checkpointing}, device.name, device.memory_gb,
                     sharding)


def changes(run: RunMemory, fit: bool) -> list[tuple[Message, float]]:
    """(what to set, the estimate's total with it) for each memory setting not already on, one at
    a time. fit: the batch and cutoff proposed are the largest below the current ones whose
    estimate fits the device (none when even the smallest does not); else half the current ones."""
    found = [_named(message_id, run.estimate(**setting))
             for message_id, setting in SWITCHES if not _already(run, setting)]
    batch = _smaller(run, "batch_size", fit)
    if batch is not None:
        found.append(_batch_change(run, batch))
    cutoff = _smaller(run, "cutoff_len", fit)
    if cutoff is not None:
        found.append(_named("memory.change.cutoff", run.estimate(cutoff_len=cutoff), cutoff=cutoff))
    return found


# The switches that lower memory whatever the batch: gradient checkpointing, then a 4-bit base.
SWITCHES = (("memory.change.checkpointing", {"gradient_checkpointing": True}),
            ("memory.change.qlora", {"method": "qlora", "quantization_bits": 4}))


def fit_hint(run: RunMemory) -> Message:
    """For a run the estimate says does not fit: the single changes that make it fit, each with
    its estimate; else changes one after another (each estimate counts the ones before it) until
    it fits; else what even batch 1 at the shortest cutoff would need."""
    single = [change for change, total in changes(run, fit=True) if total <= run.limit_gb]
    if single:
        return msg("memory.fit.any", changes=single)
    current, steps = run, []
    for message_id, setting in SWITCHES:
        if not _already(current, setting):
            current = current.with_settings(**setting)
            steps.append(_named(message_id, current.estimate())[0])
            if _fits(current):
                return msg("memory.fit.together", changes=steps)
    batch = _smaller(current, "batch_size", True)
    if batch is not None:
        return msg("memory.fit.together", changes=[*steps, _batch_change(current, batch)[0]])
    if current.settings["batch_size"] > 1:
        steps.append(_batch_change(current, 1)[0])
        current = current.with_settings(**_batch(current.settings, 1))
    cutoff = _smaller(current, "cutoff_len", True)
    if cutoff is not None:
        change = _named("memory.change.cutoff", current.estimate(cutoff_len=cutoff), cutoff=cutoff)[0]
        return msg("memory.fit.together", changes=[*steps, change])
    cutoff = min(MIN_CUTOFF, current.settings["cutoff_len"])
    return msg("memory.fit.none", total=current.estimate(cutoff_len=cutoff).total_gb, cutoff=cutoff,
               device=run.device_name)


def oom_advice(run: RunMemory) -> Message:
    """After a run ran out of memory: every setting not already on, each with its estimate."""
    found = [change for change, _ in changes(run, fit=False)]
    return msg("train.advice.oom", steps=found) if found else msg("memory.oom.nothing_left")


def advice_without_estimate(config) -> Message:
    """After a run ran out of memory, for a model without an estimate: the settings to turn, by name."""
    if config is None:
        return msg("train.advice.oom_short")
    steps = [msg("train.oom.batch", batch=config.per_device_train_batch_size,
                 accumulation=config.gradient_accumulation_steps),
             msg("train.oom.cutoff", cutoff=config.cutoff_len)]
    if config.gradient_checkpointing is not True:  # False or auto
        steps.append(msg("train.oom.checkpointing"))
    if config.method != "qlora" or config.quantization_bits != 4:
        steps.append(msg("train.oom.qlora", method=config.method))
    return msg("train.advice.oom", steps=steps)  # a list of messages: each translated, joined by "; "


def estimate_sentence(run: RunMemory) -> Message:
    return msg("memory.oom.estimate", total=run.estimate().total_gb, device=run.device_name, memory=run.device_gb)


def _already(run: RunMemory, setting: dict) -> bool:
    return all(run.settings.get(name) == value for name, value in setting.items())


def _fits(run: RunMemory, **changes) -> bool:
    return run.estimate(**changes).total_gb <= run.limit_gb


def _named(message_id: str, estimate: MemoryEstimate, **args) -> tuple[Message, float]:
    return msg(message_id, total=estimate.total_gb, **args), estimate.total_gb


def _batch(settings: dict, batch: int) -> dict:
    """A per-device batch with the accumulation that keeps the effective batch."""
    effective = settings["batch_size"] * settings["gradient_accumulation_steps"]
    return {"batch_size": batch, "gradient_accumulation_steps": math.ceil(effective / batch)}


def _batch_change(run: RunMemory, batch: int) -> tuple[Message, float]:
    setting = _batch(run.settings, batch)
    return _named("memory.change.batch", run.estimate(**setting), batch=batch,
                  accumulation=setting["gradient_accumulation_steps"])


def _smaller(run: RunMemory, name: str, fit: bool) -> int | None:
    """A value of `name` below the current one: a batch that divides the effective batch (so the
    accumulation keeps it exactly), a cutoff in steps of 32 from MIN_CUTOFF. fit: the largest whose
    estimate fits (estimates grow with both, so a bisection), None when even the smallest does not;
    otherwise the largest at most half the current one."""
    current = run.settings[name]
    if name == "batch_size":
        effective = current * run.settings["gradient_accumulation_steps"]
        values = [b for b in range(1, current) if effective % b == 0]
    else:
        values = list(range(MIN_CUTOFF, current, 32))
    if not fit:
        halves = [v for v in values if v <= current // 2]
        return halves[-1] if halves else None
    if not values or not _fits(run, **_setting(run, name, values[0])):
        return None
    low, high = 0, len(values)  # values[low] fits; values[high] (or the current value) does not
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if _fits(run, **_setting(run, name, values[middle])) else (low, middle)
    return values[low]


def _setting(run: RunMemory, name: str, value: int) -> dict:
    return _batch(run.settings, value) if name == "batch_size" else {name: value}


def memory_of_run(config, models_dir, devices: list, precision: str | None = None,
                  world_size: int = 1) -> RunMemory | None:
    """RunMemory of a run on the devices it trains on (the smallest decides); `precision` as the
    worker resolved it (None: resolved here). None when there is no estimate for its model."""
    try:
        arch = architecture_for(config.model_name_or_path, models_dir)
        precision = precision or config.check_devices(devices)
    except (ValueError, ConfigError, OSError):
        return None
    device = min(devices, key=lambda d: d.memory_gb)
    return run_memory(config, arch, device, precision, world_size)
