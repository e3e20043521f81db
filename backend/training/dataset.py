"""Canonical rows -> encoded train / eval datasets for the Trainer.

Rows come from the demo dataset, a workspace dataset (datasets/<name>/, with
its own eval split when it has one) or a file. Every row goes through
backend.data.encode (the chat template, assistant-only labels), so the token
counts the Data tab shows are the ones trained on. Rows over cutoff_len are
truncated or dropped per `overflow`; rows whose answer was cut away entirely
(or that have no assistant turn) are always dropped: they carry no loss.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from backend.config import RunConfig, split_sizes
from backend.data.encode import IGNORE_INDEX, encode_messages
from backend.workspace import Workspace

EVAL_FILES = ("eval.jsonl", "validation.jsonl", "test.jsonl")


class DatasetNotFound(FileNotFoundError):
    """The configured dataset names no file, folder or workspace dataset."""


@dataclass
class RowCounts:
    total: int = 0
    dropped: int = 0  # over cutoff with overflow=drop, answer cut away, or no answer
    truncated: int = 0  # kept, but cut to cutoff_len
    train: int = 0
    eval: int = 0
    reasons: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"rows_total": self.total, "rows_dropped": self.dropped, "rows_truncated": self.truncated,
                "rows_train": self.train, "rows_eval": self.eval, "dropped_reasons": self.reasons}


def resolve_dataset(name: str, workspace: Workspace) -> Path:
    """The file or folder behind `dataset`: 'demo', a workspace dataset name, or a path."""
    if name == "demo":
        from backend.demo_data import ensure_demo_dataset

        return ensure_demo_dataset(workspace.datasets_dir)
    named = workspace.datasets_dir / name
    if "/" not in name and named.is_dir():
        return named
    path = Path(name).expanduser()
    if path.exists():
        return path
    raise DatasetNotFound(f"Dataset {name!r} not found: no file or folder {path.resolve()} "
                          f"and no workspace dataset {named}.")


def load_rows(source: Path) -> tuple[list[dict], list[dict] | None]:
    """(rows, eval rows or None) in canonical form from a file or dataset folder."""
    source = Path(source)
    if source.is_dir():
        data = source / "data.jsonl"
        if not data.is_file():
            raise DatasetNotFound(f"Dataset folder {source} has no data.jsonl.")
        eval_file = next((source / n for n in EVAL_FILES if (source / n).is_file()), None)
        return _read_file(data), (_read_file(eval_file) if eval_file else None)
    return _read_file(source), None


def _read_file(path: Path) -> list[dict]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        with open(path, encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
    elif suffix == ".json":
        records = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(records, dict):
            records = next((v for v in records.values() if isinstance(v, list)), [])
    elif suffix == ".csv":
        with open(path, encoding="utf-8", newline="") as handle:
            records = list(csv.DictReader(handle))
    elif suffix == ".parquet":
        import pandas as pd

        records = pd.read_parquet(path).to_dict(orient="records")
    else:
        raise ValueError(f"{path}: unsupported file type {suffix!r}; use JSON, JSONL, CSV or Parquet.")
    return [_canonical(r, path, i) for i, r in enumerate(records)]


def _canonical(record: dict, path: Path, index: int) -> dict:
    """messages / alpaca / sharegpt -> {"messages": [...]} (DESIGN section 4)."""
    if "messages" in record:
        return {"messages": [{"role": m["role"], "content": m["content"]} for m in record["messages"]]}
    if "instruction" in record and "output" in record:
        messages = [{"role": "system", "content": record["system"]}] if record.get("system") else []
        for user, answer in record.get("history") or []:
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
        user = record["instruction"] + ("\n" + record["input"] if record.get("input") else "")
        return {"messages": [*messages, {"role": "user", "content": user},
                             {"role": "assistant", "content": record["output"]}]}
    if "conversations" in record:
        roles = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}
        messages = [{"role": "system", "content": record["system"]}] if record.get("system") else []
        messages += [{"role": roles.get(t["from"], "user"), "content": t["value"]} for t in record["conversations"]]
        return {"messages": messages}
    raise ValueError(f"{path} row {index}: no 'messages', alpaca ('instruction', 'output') or "
                     f"sharegpt ('conversations') fields; fix the row or map the columns in the Data tab.")


def split_rows(rows: list[dict], val_size: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Seeded shuffle, then the last `val_size` share is the eval split."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    n_train, _ = split_sizes(len(rows), val_size)
    return [rows[i] for i in order[:n_train]], [rows[i] for i in order[n_train:]]


def encode_rows(tokenizer, rows: list[dict], config: RunConfig, counts: RowCounts) -> list[dict]:
    """Encoded rows {input_ids, labels, length}; updates `counts` (dropped / truncated)."""
    encoded = []
    for row in rows:
        counts.total += 1
        enc = encode_messages(tokenizer, row["messages"], config.cutoff_len, config.train_on_prompt)
        reason = None
        if enc.truncated and config.overflow == "drop":
            reason = "longer than cutoff_len (overflow: drop)"
        elif enc.response_cut:
            reason = "answer cut away by cutoff_len"
        elif all(label == IGNORE_INDEX for label in enc.labels):
            reason = "no assistant turn to learn from"
        if reason:
            counts.dropped += 1
            counts.reasons[reason] = counts.reasons.get(reason, 0) + 1
            continue
        counts.truncated += enc.truncated
        # `length` here is the trained length: the length-grouped sampler reads it.
        encoded.append({"input_ids": enc.input_ids, "labels": enc.labels, "length": len(enc.input_ids)})
    return encoded


def build_datasets(tokenizer, config: RunConfig, workspace: Workspace):
    """(train Dataset, eval Dataset or None, RowCounts)."""
    from datasets import Dataset

    rows, eval_rows = load_rows(resolve_dataset(config.dataset, workspace))
    if eval_rows is None and config.val_size > 0:
        rows, eval_rows = split_rows(rows, config.val_size, config.seed)
    if config.val_size == 0:
        eval_rows = None  # the user turned evaluation off
    counts = RowCounts()
    train = encode_rows(tokenizer, rows, config, counts)
    evaluation = encode_rows(tokenizer, eval_rows, config, counts) if eval_rows else []
    counts.train, counts.eval = len(train), len(evaluation)
    if not train:
        raise ValueError(f"No training rows left out of {counts.total} ({counts.reasons}); "
                         f"raise cutoff_len or set overflow to truncate.")
    return Dataset.from_list(train), (Dataset.from_list(evaluation) if evaluation else None), counts
