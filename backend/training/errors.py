"""Exceptions -> what a person reads: one sentence (error), what to do
(advice), and the exit code. The worker writes both into status.json and
train.log; exit code 2 means "the config or a path is wrong, nothing ran"."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from backend.config import ConfigError, RunConfig
from backend.run_files import checkpoint_step, list_checkpoints, update_status

log = logging.getLogger("backend.train")

EXIT_CONFIG = 2
EXIT_FAILED = 1
TRACEBACK_ADVICE = "See train.log for the full traceback."


class DiskFullError(OSError):
    """Not enough free disk for the next checkpoint."""


@dataclass
class Explained:
    error: str
    advice: str
    exit_code: int = EXIT_FAILED


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def explain(error: BaseException, config: RunConfig | None = None) -> Explained:
    from backend.models import ModelLoadError
    from backend.training.dataset import DatasetNotFound

    message = _first_line(error)
    if isinstance(error, ConfigError):
        return Explained(message, "Fix the setting named above and start again.", EXIT_CONFIG)
    if isinstance(error, DatasetNotFound):
        return Explained(message, "Check the dataset path, or pick a dataset saved in the Data tab.", EXIT_CONFIG)
    if "bitsandbytes" in message or (isinstance(error, ImportError) and "bitsandbytes" in repr(error)):
        return Explained(f"4/8-bit loading failed: {message}",
                         "Install bitsandbytes (pip install bitsandbytes==0.50.2), or choose method lora or full.")
    if isinstance(error, ModelLoadError):
        missing = "does not exist" in message or "not a model folder" in message or "not a local folder" in message
        return Explained(message, "Check model_name_or_path: a local Hugging Face folder, 'demo', or a preset.",
                         EXIT_CONFIG if missing else EXIT_FAILED)
    if _is_oom(error):
        return Explained(f"The GPU ran out of memory ({message[:160]}).", oom_advice(config))
    if isinstance(error, DiskFullError) or (isinstance(error, OSError) and error.errno == errno.ENOSPC):
        return Explained(f"Not enough disk space to save a checkpoint: {message}.",
                         "Free disk space or lower save_total_limit, then resume: the last complete "
                         "checkpoint was kept.")
    if "Target modules" in message and "not found" in message:
        return Explained(f"lora_target names modules the model does not have: {message}",
                         "Use lora_target: all-linear, or module names from the model (q_proj, v_proj, ...).",
                         EXIT_CONFIG)
    return Explained(f"{type(error).__name__}: {message}", TRACEBACK_ADVICE)


def _is_oom(error: BaseException) -> bool:
    torch = sys.modules.get("torch")  # no torch loaded yet: it cannot be a torch OOM
    if torch is not None and isinstance(error, torch.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def oom_advice(config: RunConfig | None) -> str:
    if config is None:
        return "Lower per_device_train_batch_size or cutoff_len, or turn on gradient_checkpointing."
    steps = [f"lower per_device_train_batch_size (now {config.per_device_train_batch_size}) and raise "
             f"gradient_accumulation_steps (now {config.gradient_accumulation_steps}) to keep the effective batch",
             f"lower cutoff_len (now {config.cutoff_len})"]
    if not config.gradient_checkpointing:
        steps.append("turn on gradient_checkpointing (now off)")
    if config.method != "qlora" or config.quantization_bits != 4:
        steps.append(f"use method qlora with quantization_bits 4 (now {config.method})")
    return "Try: " + "; ".join(steps) + "."


def fail(job, error: BaseException, run_dir: Path | None = None) -> int:
    """Log the error as one sentence + advice (and the traceback for unexpected
    ones), record it in status.json, and return the exit code. `run_dir`: the
    folder named on the command line, for errors before the job exists."""
    explained = explain(error, job.config if job else None)
    logged = job is not None and job.run_dir.is_dir()
    if not logged and explained.advice == TRACEBACK_ADVICE:
        # No train.log exists to point at: the traceback goes to stderr, above the one line.
        traceback.print_exception(error, file=sys.stderr)
        explained.advice = "The traceback is printed above; report it if the sentence does not say what to fix."
    line = f"error: {explained.error} Advice: {explained.advice}"
    if job is None and run_dir is not None and run_dir.is_dir() and int(os.environ.get("RANK", "0")) == 0:
        update_status(run_dir, state="failed", exit_code=explained.exit_code, ended_at=time.time(),
                      error=explained.error, advice=explained.advice)
    if logged and job.is_main and "disk space" in explained.error:
        _remove_partial_checkpoints(job.run_dir)
    if logged:
        if explained.exit_code != EXIT_CONFIG:
            log.error("%s", "".join(traceback.format_exception(error)).rstrip())
        log.error("%s", line)
        if job.is_main:
            update_status(job.run_dir, state="failed", exit_code=explained.exit_code, ended_at=time.time(),
                          error=explained.error, advice=explained.advice)
    else:
        print(line, file=sys.stderr)  # nothing was created: the one line is all there is
    torch = sys.modules.get("torch")
    if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return explained.exit_code


def _remove_partial_checkpoints(run_dir: Path) -> None:
    """After a failed save: drop checkpoint folders newer than the last complete
    one (never complete ones), so the space is back for the resume."""
    complete = list_checkpoints(run_dir)
    last = checkpoint_step(complete[-1]) if complete else -1
    for folder in list_checkpoints(run_dir, complete_only=False):
        if checkpoint_step(folder) > last:
            shutil.rmtree(folder, ignore_errors=True)
            log.error("removed the incomplete %s", folder.name)
