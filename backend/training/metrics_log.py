"""metrics.jsonl writer (docs/CONTRACTS.md, metrics.jsonl lines). One JSON object per line:

    {"time": unix_s, "step": int, "epoch": float, "kind": "train" | "eval" | "system" | "learned_check", ...}

kind "train" (every logging_steps optimizer steps):
    loss, learning_rate, grad_norm (total, before clipping),
    tokens_per_second  non-padding tokens (attention_mask == 1) per wall
                       second, all processes together, since the previous
                       train line; time spent in evaluation / saving excluded
    tokens_seen        non-padding tokens trained on so far
    memory_allocated_gb, memory_reserved_gb   on a GPU (torch.cuda, this process)
    memory_rss_gb                             process resident memory (always)
    grad_norms         {"attn": [float per layer], "mlp": [float per layer], "other": float}
                       L2 norm of the gradients of the trainable parameters of
                       each decoder layer's attention / MLP blocks (index =
                       layer index; 0.0 where a block has no trainable
                       parameters), and of everything else (embeddings, norms,
                       lm_head) as one number; before clipping, like grad_norm.
    preference stages (TRL's names): rewards/chosen, rewards/rejected,
    rewards/margins, rewards/accuracies (share of pairs whose chosen reward is
    higher), logps/chosen, logps/rejected, logits/*, kl, nll_loss, log_odds_*
kind "eval": eval_loss (plus eval_runtime etc. as the Trainer reports them;
    eval_rewards/accuracies etc. for the preference stages).
kind "system": event ("start" | "resume" | "end"), trainable_parameters,
    total_parameters, precision, world_size, and at the end peak memory.
kind "learned_check": right, ended, asked, of, learned, seconds (written by the learned
    stop, backend/training/learned_stop.py, at an epoch's end).

Only the main process (rank 0) writes.
"""

from __future__ import annotations

import logging
import math
import re
import time
from pathlib import Path

import psutil
import torch
from transformers import TrainerCallback

from backend.runs.files import append_metrics, update_status

log = logging.getLogger("backend.train")
LAYER = re.compile(r"\.(?:layers|h|blocks|layer)\.(\d+)\.")
ATTN_WORDS = ("attn", "attention")
MLP_WORDS = ("mlp", "feed_forward", "ffn", "experts")
PREFERENCE_KEYS = ("rewards/", "logps/", "logits/", "kl", "nll_loss", "log_odds_",
                   # grpo (TRL's names): the weighted reward, each reward, completion lengths, KL, entropy
                   "reward", "completions/", "format_share", "frac_reward_zero_std", "entropy", "clip_ratio/")


def memory_record_gb() -> dict:
    """The system record's memory fields (GiB): process RSS and, on a GPU, CUDA memory allocated / reserved."""
    gb = 2**30
    record = {"memory_rss_gb": round(psutil.Process().memory_info().rss / gb, 3)}
    if torch.cuda.is_available():
        record["memory_allocated_gb"] = round(torch.cuda.memory_allocated() / gb, 3)
        record["memory_reserved_gb"] = round(torch.cuda.memory_reserved() / gb, 3)
    return record


def _group_of(name: str, num_layers: int) -> tuple[str, int]:
    match = LAYER.search(name)
    group = next((g for g, words in (("attn", ATTN_WORDS), ("mlp", MLP_WORDS)) if any(w in name for w in words)), None)
    if match and group and int(match.group(1)) < num_layers:
        return group, int(match.group(1))
    return "other", 0


def grouped_grad_norms(model, num_layers: int) -> tuple[dict, float]:
    """({"attn": [...], "mlp": [...], "other": x}, total norm) of the current gradients.

    One fused norm kernel over all gradients and one copy to the host (not a
    host sync per parameter: hundreds of LoRA tensors on a real-size model)."""
    named = [(name, p.grad) for name, p in model.named_parameters() if p.grad is not None]
    squares = {"attn": [0.0] * num_layers, "mlp": [0.0] * num_layers, "other": 0.0}
    if not named:
        return {"attn": squares["attn"], "mlp": squares["mlp"], "other": 0.0}, 0.0
    grads = [g.detach() for _, g in named]
    by_device: dict = {}
    for index, grad in enumerate(grads):
        by_device.setdefault(grad.device, []).append(index)
    values = [0.0] * len(grads)
    for indices in by_device.values():
        norms = torch._foreach_norm([grads[i].float() for i in indices])
        for i, value in zip(indices, torch.stack(norms).pow(2).tolist()):
            values[i] = value
    for (name, _), sq in zip(named, values):
        group, layer = _group_of(name, num_layers)
        if group == "other":
            squares["other"] += sq
        else:
            squares[group][layer] += sq
    norms = {"attn": [math.sqrt(s) for s in squares["attn"]], "mlp": [math.sqrt(s) for s in squares["mlp"]],
             "other": math.sqrt(squares["other"])}
    return norms, math.sqrt(sum(values))


def _num_layers(model) -> int:
    config = getattr(model, "config", None)
    config = getattr(config, "text_config", None) or config
    return int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layer", 0) or 0)


def _round(value):
    return round(value, 6) if isinstance(value, float) else value


class MetricsCallback(TrainerCallback):
    """Writes metrics.jsonl and keeps status.json's progress fields current."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.window_start = time.time()
        self.window_tokens = 0
        self.grad_norms: dict | None = None
        self.clipped_total = 0.0

    def _write(self, state, kind: str, **fields) -> None:
        if state.is_world_process_zero:
            record = {"time": round(time.time(), 3), "step": state.global_step,
                      "epoch": round(state.epoch or 0.0, 4), "kind": kind}
            record.update({k: _round(v) for k, v in fields.items()})
            append_metrics(self.run_dir, record)

    def _reset_window(self, state) -> None:
        self.window_start = time.time()
        self.window_tokens = state.num_input_tokens_seen

    def on_train_begin(self, args, state, control, **kwargs):
        self._reset_window(state)
        if state.is_world_process_zero:  # the UI can show "step 0 / N" before the first log
            update_status(self.run_dir, global_step=state.global_step, max_steps=state.max_steps,
                          epoch=round(state.epoch or 0.0, 4))

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        # global_step is incremented after the optimizer step: this step logs if the next value is a multiple.
        upcoming = state.global_step + 1
        if state.is_world_process_zero and model is not None and (
                upcoming % max(1, int(state.logging_steps)) == 0 or upcoming == 1):
            self.grad_norms, self.clipped_total = grouped_grad_norms(model, _num_layers(model))

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "loss" in logs:
            self._log_train(args, state, logs)
        elif "eval_loss" in logs:
            fields = {k: v for k, v in logs.items() if k.startswith("eval_") and isinstance(v, (int, float))}
            self._write(state, "eval", **fields)
            log.info("step %d  eval_loss %.4f", state.global_step, logs["eval_loss"])

    def _log_train(self, args, state, logs: dict) -> None:
        elapsed = max(time.time() - self.window_start, 1e-9)
        tokens = state.num_input_tokens_seen - self.window_tokens
        fields = {key: logs[key] for key in ("loss", "learning_rate", "grad_norm") if key in logs}
        fields.update({k: v for k, v in logs.items() if k.startswith(PREFERENCE_KEYS) and isinstance(v, (int, float))})
        fields["tokens_per_second"] = round(tokens / elapsed, 1)
        fields["tokens_seen"] = int(state.num_input_tokens_seen)
        fields.update(memory_record_gb())
        if self.grad_norms is not None:
            fields["grad_norms"] = self._unclipped(logs.get("grad_norm"))
            self.grad_norms = None
        self._write(state, "train", **fields)
        self._reset_window(state)
        if state.is_world_process_zero:
            update_status(self.run_dir, global_step=state.global_step, max_steps=state.max_steps,
                          epoch=round(state.epoch or 0.0, 4))
        log.info("step %d/%d  epoch %.2f  loss %.4f  lr %.3g  grad_norm %s  %.0f tok/s", state.global_step,
                 state.max_steps, state.epoch or 0.0, logs["loss"], logs.get("learning_rate", 0.0),
                 f"{logs['grad_norm']:.3f}" if "grad_norm" in logs else "-", fields["tokens_per_second"])
        if isinstance(logs.get("reward"), (int, float)):  # grpo: what the sampled completions scored
            log.info("step %d  reward %.3f  completion length %.1f tokens", state.global_step, logs["reward"],
                     logs.get("completions/mean_length") or 0.0)

    def _unclipped(self, grad_norm) -> dict:
        """Clipping scales every gradient by one factor: undo it so the groups match grad_norm."""
        scale = grad_norm / self.clipped_total if grad_norm and self.clipped_total > 0 else 1.0
        norms = self.grad_norms
        return {"attn": [round(x * scale, 6) for x in norms["attn"]],
                "mlp": [round(x * scale, 6) for x in norms["mlp"]],
                "other": round(norms["other"] * scale, 6)}

    def on_evaluate(self, args, state, control, **kwargs):
        self._reset_window(state)  # evaluation time is not training throughput

    def on_save(self, args, state, control, **kwargs):
        self._reset_window(state)
