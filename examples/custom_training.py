"""A working example of the two ways to customise a run (docs/CUSTOMIZE.md).

    callbacks: [examples.custom_training:LossSpikeAlert]
    loss_function: examples.custom_training:label_smoothed_loss

The worker imports these by 'module:Name' (the repository root is on its
path; put your own module in the working folder or on PYTHONPATH).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch.nn.functional as F
from transformers import TrainerCallback

log = logging.getLogger("backend.train")  # lines land in the run's train.log


class LossSpikeAlert(TrainerCallback):
    """Warn when the train loss jumps above `factor` x its running average, and
    keep a record of every spike in the run folder (spikes.jsonl)."""

    factor = 2.0
    smoothing = 0.9

    def __init__(self):
        self.average: float | None = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        loss = (logs or {}).get("loss")
        if loss is None or not state.is_world_process_zero:
            return
        if self.average is not None and loss > self.factor * self.average:
            log.warning("loss spike at step %d: %.3f (running average %.3f)", state.global_step, loss, self.average)
            with open(Path(args.output_dir) / "spikes.jsonl", "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"step": state.global_step, "loss": loss, "average": self.average}) + "\n")
        self.average = loss if self.average is None else self.smoothing * self.average + (1 - self.smoothing) * loss

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            log.info("LossSpikeAlert watching for loss > %.1fx its running average", self.factor)


def label_smoothed_loss(outputs, labels, num_items_in_batch=None, smoothing: float = 0.1):
    """Causal-LM cross-entropy with label smoothing.

    The Trainer calls it as fn(outputs, labels, num_items_in_batch=...).
    `labels` are the unshifted labels (-100 = not trained on); position t
    predicts token t + 1. `num_items_in_batch` is the number of trained tokens
    in the whole gradient-accumulation batch: dividing the *sum* by it keeps
    the loss scale right when batches are split into micro-batches.
    """
    logits = outputs.logits[:, :-1, :].float()
    targets = labels[:, 1:].to(logits.device)
    total = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100,
                            label_smoothing=smoothing, reduction="sum")
    count = num_items_in_batch if num_items_in_batch is not None else (targets != -100).sum()
    return total / count
