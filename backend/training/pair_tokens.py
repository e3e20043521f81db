"""Tokens seen by the pair trainers whose batches have no `input_ids` (TRL's ORPO and CPO/SimPO).

Their collators hand the Trainer `chosen_input_ids` / `rejected_input_ids` (each prompt + answer)
with their attention masks. The Trainer counts tokens from the model's `main_input_name`
(`input_ids`): it found none, logged "Tried to track the number of tokens seen ..." for every
micro-batch and counted 0, so tokens/s and summary.json's train_tokens read 0.
"""

from __future__ import annotations

import torch

PAIR_MASKS = ("chosen_attention_mask", "rejected_attention_mask")


class PairTokenCount:
    """Mixin before the TRL trainer class: the forward runs over prompt + chosen and prompt + rejected,
    so the tokens seen are the non-padding positions of both masks."""

    def _track_num_input_tokens(self, inputs):
        if "input_ids" not in inputs and all(k in inputs for k in PAIR_MASKS):
            mask = torch.cat([inputs[k].flatten() for k in PAIR_MASKS])
            inputs = {"input_ids": mask, "attention_mask": mask}  # the Trainer's own count, over these positions
        return super()._track_num_input_tokens(inputs)


def counting_pair_tokens(trainer_class: type) -> type:
    if issubclass(trainer_class, PairTokenCount):
        return trainer_class
    return type(trainer_class.__name__, (PairTokenCount, trainer_class), {})
