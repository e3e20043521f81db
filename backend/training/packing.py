"""Padding-free packing: the rows of a batch concatenated into one row with no
padding, `position_ids` restarting at 0 at each row, and the first label of
each row masked (it would otherwise be predicted from the previous row's last
token).

A batch is the `per_device_train_batch_size` rows the sampler hands over (the
token budget is therefore at most batch x cutoff_len), so the number of
batches per epoch, the learning-rate schedule and the Plan's numbers are the
same as with padded batches; only the padding work disappears.

Correctness needs the model to run without a KV cache (`use_cache=False`,
DESIGN section 8): transformers then builds a block-diagonal mask from the
position ids (sdpa, eager, flex) or uses the varlen kernels (FlashAttention).
`packing_works` checks exactly that on the loaded model before training, so
a model or attention implementation that does not support it falls back to
padded, length-grouped batches with a log line instead of training on rows
that attend to each other.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from backend.data.encode import IGNORE_INDEX

log = logging.getLogger("backend.train")


@dataclass
class PackedCollator:
    """rows -> {input_ids, labels, position_ids}, each of shape (1, total tokens)."""

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        input_ids, labels, positions = [], [], []
        for row in rows:
            ids = list(row["input_ids"])
            input_ids += ids
            labels += [IGNORE_INDEX] + list(row["labels"])[1:]
            positions += range(len(ids))
        return {
            "input_ids": torch.tensor([input_ids], dtype=torch.long),
            "labels": torch.tensor([labels], dtype=torch.long),
            "position_ids": torch.tensor([positions], dtype=torch.long),
        }


def _tolerance(dtype: torch.dtype) -> float:
    return 1e-4 if dtype == torch.float32 else 5e-2


@torch.no_grad()
def packing_works(model, lengths: tuple[int, ...] = (5, 7)) -> bool:
    """True when the packed forward of a few random rows gives each row's own
    logits (so the rows do not see each other); runs in eval mode (no dropout)."""
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        vocab = model.get_input_embeddings().weight.shape[0]
        generator = torch.Generator().manual_seed(0)
        rows = [torch.randint(0, vocab, (n,), generator=generator).to(device) for n in lengths]
        alone = [model(input_ids=row[None], use_cache=False).logits[0].float() for row in rows]
        packed = PackedCollator()([{"input_ids": r.tolist(), "labels": r.tolist()} for r in rows])
        logits = model(input_ids=packed["input_ids"].to(device), position_ids=packed["position_ids"].to(device),
                       use_cache=False).logits[0]
        together = torch.split(logits.float(), list(lengths))
        scale = max(float(a.abs().max()) for a in alone) + 1.0
        error = max(float((a - b).abs().max()) for a, b in zip(alone, together))
        return error <= _tolerance(model.get_input_embeddings().weight.dtype) * scale
    except Exception as error:  # noqa: BLE001 - any failure means: do not pack this model
        log.info("packing check failed: %s", error)
        return False
    finally:
        model.train(was_training)
