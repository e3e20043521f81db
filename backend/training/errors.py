"""Exceptions -> what a person reads: one sentence (error), what to do
(advice), and the exit code. The worker writes both into status.json and
train.log; exit code 2 means "the config or a path is wrong, nothing ran"."""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.data.resolve import DatasetNotFound
from backend.messages import Message, UserError, message_of, msg
from backend.models import memory_advice
from backend.models.hardware import training_devices
from backend.models.loading import ModelLoadError
from backend.models.memory_advice import advice_without_estimate as oom_advice
from backend.models.memory_advice import memory_of_run
from backend.runs.files import list_checkpoints, update_status
from backend.training.disk import DiskFullError, free_on, is_disk_full, is_read_only, mount_point, remove_partial_saves

log = logging.getLogger("backend.train")

EXIT_CONFIG = 2
EXIT_FAILED = 1
TRACEBACK_ADVICE = str(msg("train.advice.log"))


class DivergedError(UserError):
    """The loss is NaN or infinite: training on is pointless (the weights hold NaN too). Raised by
    callbacks.FiniteLoss; it lives here so that explaining a refusal never imports torch."""


@dataclass
class Explained:
    error: str  # English, for train.log, the command line and every reader of status.json
    advice: str
    exit_code: int = EXIT_FAILED
    # The same as catalogued messages (backend/messages.py) where they have ids: the UI translates those.
    error_message: Message | None = None
    advice_message: Message | None = None

    def status_fields(self) -> dict:
        return {"error": self.error, "advice": self.advice,
                "error_message": self.error_message.to_dict() if self.error_message else None,
                "advice_message": self.advice_message.to_dict() if self.advice_message else None}


def _said(error: str | Message, advice: str | Message, exit_code: int = EXIT_FAILED) -> Explained:
    return Explained(str(error), str(advice), exit_code, message_of(error), message_of(advice))


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def explain(error: BaseException, config: RunConfig | None = None, run_dir: Path | None = None,
            models_dir: Path | None = None) -> Explained:
    """`models_dir`: the workspace's models folder, for the memory estimate an out-of-memory error names."""

    message = _first_line(error)
    own = message_of(error) if "\n" not in str(error).strip() else None  # one catalogued line: keep its id
    if isinstance(error, ConfigError):
        return _said(own or message, msg("train.advice.config"), EXIT_CONFIG)
    if isinstance(error, DivergedError):
        return _said(own or message, msg("train.advice.not_finite"))
    if isinstance(error, DatasetNotFound):
        return _said(own or message, msg("train.advice.dataset"), EXIT_CONFIG)
    if "bitsandbytes" in message or (isinstance(error, ImportError) and "bitsandbytes" in repr(error)):
        return _said(msg("train.error.bitsandbytes", error=message), msg("train.advice.bitsandbytes"))
    if isinstance(error, ModelLoadError):
        missing = "does not exist" in message or "not a model folder" in message or "not a local folder" in message
        return _said(own or message, msg("train.advice.model"), EXIT_CONFIG if missing else EXIT_FAILED)
    if _is_oom(error):
        return out_of_memory(error, message, config, models_dir)
    if config is not None and config.nnodes > 1 and is_peer_lost(error):
        return node_lost(message, config, run_dir)
    if is_read_only(error):
        return read_only(message, run_dir)
    if is_disk_full(error):
        return disk_full(error, message, run_dir)
    if "Target modules" in message and "not found" in message:
        return _said(msg("train.error.targets", error=message), msg("train.advice.targets"), EXIT_CONFIG)
    return _said(msg("train.error.other", kind=type(error).__name__, error=message), msg("train.advice.log"))


def disk_full(error: BaseException, message: str, run_dir: Path | None) -> Explained:
    """Which disk, how much is free, and whether a resume has a checkpoint to start from."""

    where = Path(run_dir) if run_dir is not None else Path.cwd()
    detail = message if isinstance(error, DiskFullError) else f"No space left on device ({message[:120]})"
    said = msg("train.error.disk", mount=str(mount_point(where)), free=free_on(where), error=detail)
    kept = list_checkpoints(run_dir) if run_dir is not None else []
    advice = (msg("train.advice.disk", checkpoint=kept[-1].name) if kept else msg("train.advice.disk_none"))
    return _said(said, advice)


def read_only(message: str, run_dir: Path | None) -> Explained:
    """A filesystem that turned read-only (often the kernel's answer to a disk error): no space to free."""

    where = Path(run_dir) if run_dir is not None else Path.cwd()
    said = msg("train.error.read_only", mount=str(mount_point(where)), error=message[:200])
    kept = list_checkpoints(run_dir) if run_dir is not None else []
    advice = msg("train.advice.read_only", then=msg("train.advice.read_only.resume", checkpoint=kept[-1].name)
                 if kept else msg("train.advice.read_only.restart"))
    return _said(said, advice)


# What gloo and NCCL say when the process at the other end of a connection is gone.
PEER_LOST = ("connection closed by peer", "connection reset by peer", "broken pipe", "remote process exited",
             "socket closed", "connection refused")


def is_peer_lost(error: BaseException) -> bool:
    torch = sys.modules.get("torch")
    dist_error = torch is not None and isinstance(error, getattr(torch.distributed, "DistError", ()))
    text = str(error).lower()
    return (dist_error or "gloo" in text or "nccl" in text) and any(p in text for p in PEER_LOST)


def node_lost(message: str, config: RunConfig, run_dir: Path | None) -> Explained:
    """Which node went away (with two, the other one; the peer's address does not say which node it
    is on) and how to resume: node 0 from the app, each other node from its shown command."""

    here = int(os.environ.get("GROUP_RANK", config.node_rank))   # torchrun's node rank of this process
    gone = [n for n in range(config.nnodes) if n != here]
    nodes = " or ".join(str(n) for n in gone)
    said = (msg("train.error.node_lost", node=nodes, nnodes=config.nnodes, error=message[:200]) if len(gone) == 1
            else msg("train.error.node_lost_some", node=nodes, nnodes=config.nnodes, error=message[:200]))
    kept = list_checkpoints(run_dir) if run_dir is not None else []
    then = (msg("train.advice.node_lost.resume", checkpoint=kept[-1].name) if kept
            else msg("train.advice.node_lost.restart"))
    others = ", ".join(str(n) for n in range(1, config.nnodes))
    return _said(said, msg("train.advice.node_lost", node=nodes, master=f"{config.master_addr}:{config.master_port}",
                           others=others, then=then))


# What torch's CPU allocator says when malloc fails (its RuntimeError never says "out of memory").
CPU_ALLOCATOR = "DefaultCPUAllocator"


def _is_oom(error: BaseException) -> bool:
    if _is_cpu_oom(error):
        return True
    torch = sys.modules.get("torch")  # no torch loaded yet: it cannot be a torch OOM
    if torch is not None and isinstance(error, torch.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def _is_cpu_oom(error: BaseException) -> bool:
    return isinstance(error, MemoryError) or (isinstance(error, RuntimeError) and CPU_ALLOCATOR in str(error))


def out_of_memory(error: BaseException, message: str, config: RunConfig | None, models_dir: Path | None) -> Explained:
    """Which memory ran out, the run's estimate, and each setting not already on with the estimate it gives."""

    on_cpu = _is_cpu_oom(error)
    if CPU_ALLOCATOR in message:  # drop torch's "[enforce fail at alloc_cpu.cpp:127] err == 0." prefix
        message = message[message.index(CPU_ALLOCATOR):]
    run = _run_memory(config, models_dir) if config is not None and models_dir is not None else None
    if run is None:
        said = (msg("train.error.oom_cpu", error=message[:160], estimate="") if on_cpu
                else msg("train.error.oom", error=message[:160]))
        return _said(said, oom_advice(config))
    estimate = memory_advice.estimate_sentence(run)
    said = msg("train.error.oom_cpu" if on_cpu else "train.error.oom_gpu", error=message[:160], estimate=estimate)
    return _said(said, memory_advice.oom_advice(run))


def _run_memory(config: RunConfig, models_dir: Path):
    """The run's memory estimate on the devices it trains on; None when there is none."""

    try:
        devices = training_devices(config.devices)
    except ValueError:
        return None
    return memory_of_run(config, models_dir, devices, world_size=int(os.environ.get("WORLD_SIZE", "1")))


def fail(job, error: BaseException, run_dir: Path | None = None) -> int:
    """Log the error as one sentence + advice (and the traceback for unexpected
    ones), record it in status.json, and return the exit code. `run_dir`: the
    folder named on the command line, for errors before the job exists."""
    logged = job is not None and job.run_dir.is_dir()
    if logged and job.is_main and is_disk_full(error):
        for name in remove_partial_saves(job.run_dir):  # the space is back for the resume
            log.error("removed the incomplete %s", name)
    explained = explain(error, job.config if job else None, job.run_dir if logged else None,
                        job.workspace.models_dir if job else None)
    if not logged and explained.advice == TRACEBACK_ADVICE:
        # No train.log exists to point at: the traceback goes to stderr, above the one line.
        traceback.print_exception(error, file=sys.stderr)
        explained.advice_message = msg("train.advice.traceback_above")
        explained.advice = str(explained.advice_message)
    line = f"error: {explained.error} Advice: {explained.advice}"
    if job is None and run_dir is not None and run_dir.is_dir() and int(os.environ.get("RANK", "0")) == 0:
        _record_failure(run_dir, explained)
    if logged:
        if explained.exit_code != EXIT_CONFIG:
            log.error("%s", "".join(traceback.format_exception(error)).rstrip())
        log.error("%s", line)
        if job.is_main:
            _record_failure(job.run_dir, explained)
    else:
        print(line, file=sys.stderr)  # nothing was created: the one line is all there is
    torch = sys.modules.get("torch")
    if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return explained.exit_code


def _record_failure(run_dir: Path, explained: Explained) -> None:
    """status.json says failed; on a disk too full even for that, the log line
    and the exit code remain (the store then says the disk is full)."""
    try:
        update_status(run_dir, state="failed", exit_code=explained.exit_code, ended_at=time.time(),
                      error=explained.error, advice=explained.advice)
    except OSError as error:
        log.error("could not record the failure in status.json: %s", error)
