"""Dynamic padding: each batch is padded to its own longest row (rounded up
to a multiple of 8 for tensor-core friendly shapes), never to cutoff_len.

Together with the length-grouped sampler (rows of similar length share a
batch) padding stays a small share of the work. This is the fallback of
padding-free packing (packing.py), for models where a packed forward is not
exact, and what `packing: false` uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from backend.data.encode import IGNORE_INDEX


@dataclass
class PadToLongest:
    pad_token_id: int
    pad_to_multiple_of: int = 8
    padding_side: str = "right"

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        longest = max(len(r["input_ids"]) for r in rows)
        size = -(-longest // self.pad_to_multiple_of) * self.pad_to_multiple_of
        input_ids, labels, attention = [], [], []
        for row in rows:
            pad = size - len(row["input_ids"])
            ids, lab, mask = list(row["input_ids"]), list(row["labels"]), [1] * len(row["input_ids"])
            if self.padding_side == "left":
                input_ids.append([self.pad_token_id] * pad + ids)
                labels.append([IGNORE_INDEX] * pad + lab)
                attention.append([0] * pad + mask)
            else:
                input_ids.append(ids + [self.pad_token_id] * pad)
                labels.append(lab + [IGNORE_INDEX] * pad)
                attention.append(mask + [0] * pad)
        return {
            "input_ids": torch.tensor(input_ids, dtype=torch.long),
            "labels": torch.tensor(labels, dtype=torch.long),
            "attention_mask": torch.tensor(attention, dtype=torch.long),
        }
