"""summary.json: what a finished (or stopped) run achieved, in one file."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

from backend.runs.files import SUMMARY_FILE
from backend.storage.atomic_files import atomic_write_json, read_json

CLOCK_FILE = "run_clock.json"  # in each checkpoint: the run's seconds and sessions up to its step


class RunClock(TrainerCallback):
    """Wall seconds of the whole run, across resumes. Each checkpoint records the seconds that led
    to its step (before its completion marker: place this callback before CheckpointCallback);
    a resume continues from its checkpoint's, so summary.json's time covers the same steps as its
    token count (the work after that checkpoint, lost with the interrupted session, is in neither).
    A checkpoint without the file (an older run) counts as 0 s before the resume."""

    def __init__(self, run_dir: Path, resume_from: Path | None = None):
        saved = (read_json(Path(resume_from) / CLOCK_FILE, {}) or {}) if resume_from else {}
        self.run_dir = Path(run_dir)
        self.seconds_before = float(saved.get("train_seconds") or 0.0)
        self.sessions = int(saved.get("sessions") or 0) + 1  # this process is one more
        self.started = time.time()

    def seconds(self) -> float:
        return self.seconds_before + time.time() - self.started

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            atomic_write_json(self.run_dir / f"checkpoint-{state.global_step}" / CLOCK_FILE,
                              {"train_seconds": round(self.seconds(), 3), "sessions": self.sessions})


def peak_memory() -> dict:
    """Peak memory of this process: RSS (GiB) always, CUDA allocated / reserved on a GPU."""
    # ru_maxrss is in KiB on Linux.
    peak = {"peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)}
    if torch.cuda.is_available():
        peak["peak_allocated_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        peak["peak_reserved_gb"] = round(torch.cuda.max_memory_reserved() / 2**30, 3)
    return peak


def write_summary(run_dir: Path, *, state, train_output, clock: RunClock,
                  counts: dict, best: tuple[int, float] | None, precision: str, world_size: int,
                  final_state: str, parameters: dict, final_step: int | None = None,
                  early_stopped_at: int | None = None, estimate: dict | None = None,
                  learned_stop: dict | None = None) -> dict:
    """Time, tokens and tokens/s cover the whole run (every session, up to global_step);
    train_runtime_s is the Trainer's own figure, of this session only. `final_step`: the step
    whose weights final/ holds (the best checkpoint's after an early stop); `early_stopped_at`:
    the step where early stopping ended the run, None when it did not. `learned_stop`: the learned
    stop's checks (backend/training/learned_stop.py), when it made any. `estimate`: status.json's
    time estimate (backend/training/estimate.py), recorded with the actual seconds and its error."""
    wall = clock.seconds()
    metrics = getattr(train_output, "metrics", {}) or {}
    train_losses = [e["loss"] for e in state.log_history if "loss" in e]
    tokens = int(state.num_input_tokens_seen)  # non-padding tokens of every step up to global_step
    summary = {
        "state": final_state,
        "global_step": state.global_step,
        "max_steps": state.max_steps,
        "epochs": round(state.epoch or 0.0, 4),
        "wall_time_s": round(wall, 2),
        "sessions": clock.sessions,  # 1, plus one per resume
        "train_runtime_s": metrics.get("train_runtime"),
        "train_tokens": tokens,
        "train_tokens_per_second": round(tokens / wall, 1) if wall > 0 else None,
        "final_train_loss": train_losses[-1] if train_losses else None,
        "first_train_loss": train_losses[0] if train_losses else None,
        "best_checkpoint": f"checkpoint-{best[0]}" if best else None,
        "best_eval_loss": best[1] if best else None,
        "early_stopped_at": early_stopped_at,
        "final_step": final_step,  # None: no final/ (the run was stopped)
        "precision": precision,
        "world_size": world_size,
        **counts,
        **parameters,
        **peak_memory(),
    }
    summary.update(preference_summary(state.log_history))
    if learned_stop:
        summary["learned_stop"] = learned_stop
    if estimate:  # the time estimate made as the run started, beside what it took
        summary["estimate"] = {**estimate, "actual_s": summary["wall_time_s"],
                               "error": round(estimate["seconds_mid"] / wall - 1, 4) if wall > 0 else None}
    atomic_write_json(Path(run_dir) / SUMMARY_FILE, summary)
    return summary


def preference_summary(history: list[dict]) -> dict:
    """The last preference accuracy / margin, on training pairs and on the eval split (preference stages)."""
    out = {}
    for prefix, name in (("", "train"), ("eval_", "eval")):
        for key, label in (("rewards/accuracies", "preference_accuracy"), ("rewards/margins", "reward_margin")):
            values = [e[prefix + key] for e in history if prefix + key in e]
            if values:
                out[f"final_{name}_{label}"] = round(float(values[-1]), 4)
    return out
