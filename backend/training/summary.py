"""summary.json: what a finished (or stopped) run achieved, in one file."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import torch

from backend.runs.files import SUMMARY_FILE, atomic_write_json


def peak_memory() -> dict:
    """Peak memory of this process: RSS (GiB) always, CUDA allocated / reserved on a GPU."""
    # ru_maxrss is in KiB on Linux.
    peak = {"peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)}
    if torch.cuda.is_available():
        peak["peak_allocated_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        peak["peak_reserved_gb"] = round(torch.cuda.max_memory_reserved() / 2**30, 3)
    return peak


def write_summary(run_dir: Path, *, state, train_output, started: float, tokens_at_start: int,
                  counts: dict, best: tuple[int, float] | None, precision: str, world_size: int,
                  final_state: str, parameters: dict) -> dict:
    wall = time.time() - started
    metrics = getattr(train_output, "metrics", {}) or {}
    train_losses = [e["loss"] for e in state.log_history if "loss" in e]
    tokens = int(state.num_input_tokens_seen) - tokens_at_start
    summary = {
        "state": final_state,
        "global_step": state.global_step,
        "max_steps": state.max_steps,
        "epochs": round(state.epoch or 0.0, 4),
        "wall_time_s": round(wall, 2),
        "train_runtime_s": metrics.get("train_runtime"),
        "train_tokens": int(state.num_input_tokens_seen),
        # Non-padding tokens of this process's session (a resumed run counts from the resume).
        "train_tokens_per_second": round(tokens / wall, 1) if wall > 0 else None,
        "final_train_loss": train_losses[-1] if train_losses else None,
        "first_train_loss": train_losses[0] if train_losses else None,
        "best_checkpoint": f"checkpoint-{best[0]}" if best else None,
        "best_eval_loss": best[1] if best else None,
        "precision": precision,
        "world_size": world_size,
        **counts,
        **parameters,
        **peak_memory(),
    }
    summary.update(preference_summary(state.log_history))
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
