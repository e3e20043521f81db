"""The Trainer the worker runs: transformers' Trainer, with the causal-LM loss
computed by backend.training.loss (the head only where labels exist, in
chunks, no full logits kept) when that is exact for the model.

`fast_loss` is decided once before training (see `choose_loss`): off with a
user loss function (it needs the logits), with Liger kernels (they fuse the
head and the loss themselves) and for heads the chunked loss cannot reproduce
(adapted or quantised lm_head, logit softcapping or scaling after the head).
"""

from __future__ import annotations

import logging

import torch
from transformers import Trainer

from backend.data.encode import IGNORE_INDEX
from backend.training.loss import causal_lm_loss, chunked_loss_works, deferred_head, output_head

log = logging.getLogger("backend.train")


def choose_loss(model, *, user_loss: bool, liger: bool):
    """The lm_head for the chunked loss, or None (with the reason logged) to keep the model's own loss."""
    if user_loss or liger:
        log.info("loss: %s", "your loss_function" if user_loss else "Liger's fused linear cross-entropy")
        return None
    head = output_head(model)
    if head is None or not chunked_loss_works(model, head):
        log.info("loss: the model's own (its output head is not a plain linear layer the chunked loss reproduces)")
        return None
    log.info("loss: chunked cross-entropy on the labelled positions only (no full-vocabulary logits kept)")
    return head


class StudioTrainer(Trainer):
    def __init__(self, *args, loss_head=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_head = loss_head

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False):
        """Every checkpoint and final/ also get the base's generation_config.json (the template's EOS
        among its eos_token_id): peft saves only the adapter, and a reader of the folder alone
        (another tool, an export) then still stops where the run's answers end."""
        super().save_model(output_dir, _internal_call)
        folder = output_dir or self.args.output_dir
        model = self.accelerator.unwrap_model(self.model)
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        if self.args.should_save and getattr(base, "generation_config", None) is not None:
            base.generation_config.save_pretrained(folder)

    def evaluation_loop(self, dataloader, description, prediction_loss_only=None, ignore_keys=None,
                        metric_key_prefix="eval"):
        """eval_loss per labelled (assistant) token over the whole eval split, as Evaluate computes it
        (backend.evaluation.scoring.eval_loss): the Trainer's own is a mean of per-batch means, which
        weighs the tokens of a batch with few of them more, so the two differed for one checkpoint.
        A user loss_function keeps the Trainer's mean: its loss need not be a per-token mean."""
        own_loss = self.compute_loss_func is None
        self._eval_sums = torch.zeros(2, dtype=torch.float64, device=self.args.device) if own_loss else None
        try:
            output = super().evaluation_loop(dataloader, description, prediction_loss_only, ignore_keys,
                                             metric_key_prefix)
        finally:
            sums, self._eval_sums = self._eval_sums, None
        key = f"{metric_key_prefix}_loss"
        if sums is not None and key in output.metrics:
            sums = self.accelerator.reduce(sums, reduction="sum")  # every process's share of the split
            if sums[1] > 0:
                output.metrics[key] = (sums[0] / sums[1]).item()
        return output

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        loss, logits, labels = super().prediction_step(model, inputs, prediction_loss_only, ignore_keys)
        if loss is not None and getattr(self, "_eval_sums", None) is not None and inputs.get("labels") is not None:
            # The batch's loss is a mean over its shifted labelled positions: back to a sum and a count.
            tokens = (inputs["labels"][..., 1:] != IGNORE_INDEX).sum().to(self._eval_sums)
            self._eval_sums += torch.stack([loss.detach().to(self._eval_sums) * tokens, tokens])
        return loss, logits, labels

    def _track_num_input_tokens(self, inputs):
        # A packed batch has no attention mask and no padding: every input id is a real token
        # (counting ids != pad_token_id would miss real tokens where pad is also eos).
        if "attention_mask" not in inputs and "position_ids" in inputs:
            inputs = {**inputs, "attention_mask": torch.ones_like(inputs["input_ids"])}
        return super()._track_num_input_tokens(inputs)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if self.loss_head is None or "labels" not in inputs:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        labels = inputs["labels"]
        if not self.model_accepts_loss_kwargs:
            num_items_in_batch = None  # as the parent: such a model returns a per-batch mean
        with deferred_head(self.loss_head):
            outputs = model(**{k: v for k, v in inputs.items() if k != "labels"})
        loss = causal_lm_loss(outputs.logits, self.loss_head, labels, num_items_in_batch)
        # As Trainer.compute_loss: the token count was summed over processes, the gradients are averaged.
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * self.accelerator.num_processes
        outputs.logits = None  # hidden states, not logits: nobody should read them as logits
        return (loss, outputs) if return_outputs else loss
