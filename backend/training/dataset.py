"""Canonical rows -> encoded train / eval datasets for the Trainer.

The dataset is resolved and read by backend/data/resolve.py (the demo dataset,
a workspace dataset with its own eval split, a file or a LLaMA-Factory folder);
rows the data backend flags as unusable are skipped and counted. Every row goes through backend.data.encode (the chat
template, assistant-only labels), so the token counts the Data tab shows are
the ones trained on. Rows over cutoff_len are truncated or dropped per
`overflow`; rows whose answer was cut away entirely (or that have no assistant
turn) are always dropped: they carry no loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.config import RunConfig
from backend.data.encode import IGNORE_INDEX, encode_messages
from backend.data.identity_rows import fill_rows, identity_values
from backend.data.resolve import load_rows, resolve_dataset, run_split
from backend.runs.workspace import Workspace


@dataclass
class RowCounts:
    total: int = 0
    dropped: int = 0  # unusable (schema), over cutoff with overflow=drop, answer cut away, or no answer
    truncated: int = 0  # kept, but cut to cutoff_len
    train: int = 0
    eval: int = 0
    replay: int = 0  # of `train`: the base model's own answers mixed in (backend/training/replay.py)
    reasons: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"rows_total": self.total, "rows_dropped": self.dropped, "rows_truncated": self.truncated,
                "rows_train": self.train, "rows_eval": self.eval, "rows_replay": self.replay,
                "dropped_reasons": self.reasons}

    def drop(self, reason: str, count: int = 1) -> None:
        self.dropped += count
        self.reasons[reason] = self.reasons.get(reason, 0) + count


def encode_rows(tokenizer, rows: list[dict], config: RunConfig, counts: RowCounts) -> list[dict]:
    """Encoded rows {input_ids, labels, length}; updates `counts` (dropped / truncated)."""
    encoded = []
    for row in rows:
        counts.total += 1
        enc = encode_messages(tokenizer, row["messages"], config.cutoff_len, config.train_on_prompt, row.get("tools"))
        reason = None
        if enc.truncated and config.overflow == "drop":
            reason = "longer than cutoff_len (overflow: drop)"
        elif enc.response_cut:
            reason = "answer cut away by cutoff_len"
        elif all(label == IGNORE_INDEX for label in enc.labels):
            reason = "no assistant turn to learn from"
        if reason:
            counts.drop(reason)
            continue
        counts.truncated += enc.truncated
        # `length` here is the trained length: the length-grouped sampler reads it.
        encoded.append({"input_ids": enc.input_ids, "labels": enc.labels, "length": len(enc.input_ids)})
    return encoded


def build_datasets(tokenizer, config: RunConfig, workspace: Workspace, replay=None):
    """(train Dataset, eval Dataset or None, RowCounts). `replay(train_rows)`, when given, returns
    the replay rows to mix into the training split (backend/training/replay.py); eval stays the user's."""
    from datasets import Dataset

    counts = RowCounts()
    rows, eval_rows = load_rows(resolve_dataset(config.dataset, workspace), counts, config.dataset_name)
    rows, eval_rows = run_split(rows, eval_rows, config, config.dataset)
    values = identity_values(config)
    rows, eval_rows = fill_rows(rows, values), (fill_rows(eval_rows, values) if eval_rows else eval_rows)
    if replay is not None:
        mixed = replay(len(rows))
        counts.replay = len(mixed)
        rows = rows + mixed
    train = encode_rows(tokenizer, rows, config, counts)
    evaluation = encode_rows(tokenizer, eval_rows, config, counts) if eval_rows else []
    counts.train, counts.eval = len(train), len(evaluation)
    if not train:
        raise ValueError(f"No training rows left out of {counts.total} ({counts.reasons}); "
                         f"raise cutoff_len or set overflow to truncate.")
    return Dataset.from_list(train), (Dataset.from_list(evaluation) if evaluation else None), counts
