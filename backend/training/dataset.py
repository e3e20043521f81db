"""Canonical rows -> encoded train / eval datasets for the Trainer.

Rows come from the demo dataset, a workspace dataset (datasets/<name>/, with
its own eval split when it has one) or a file, always read through the data
backend (backend.data), so the trainer accepts exactly what the Data tab and
`python -m backend.data check` accept. Rows the data backend flags as unusable
are skipped and counted. Every row goes through backend.data.encode (the chat
template, assistant-only labels), so the token counts the Data tab shows are
the ones trained on. Rows over cutoff_len are truncated or dropped per
`overflow`; rows whose answer was cut away entirely (or that have no assistant
turn) are always dropped: they carry no loss.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path

from backend.config import ConfigError, RunConfig, split_sizes
from backend.data.encode import IGNORE_INDEX, encode_messages
from backend.data.errors import DataError
from backend.data.load import DATASET_INFO
from backend.data.saved_datasets import EVAL_FILE, is_workspace_dataset, load_dataset_rows, validate_name
from backend.messages import msg
from backend.runs.workspace import Workspace

log = logging.getLogger("backend.train")

EVAL_FILES = (EVAL_FILE,)  # a workspace dataset's held-out split (backend/data/saved_datasets.py)
SCHEMA_REASON = "unusable row (schema problem; see `python -m backend.data check`)"


class DatasetNotFound(FileNotFoundError):
    """The configured dataset names no file, folder or workspace dataset."""


class DatasetUnreadable(DatasetNotFound):
    """The data backend cannot read the dataset at all (its DataError, one sentence)."""


@dataclass
class RowCounts:
    total: int = 0
    dropped: int = 0  # unusable (schema), over cutoff with overflow=drop, answer cut away, or no answer
    truncated: int = 0  # kept, but cut to cutoff_len
    train: int = 0
    eval: int = 0
    reasons: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"rows_total": self.total, "rows_dropped": self.dropped, "rows_truncated": self.truncated,
                "rows_train": self.train, "rows_eval": self.eval, "dropped_reasons": self.reasons}

    def drop(self, reason: str, count: int = 1) -> None:
        self.dropped += count
        self.reasons[reason] = self.reasons.get(reason, 0) + count


def resolve_dataset(name: str, workspace: Workspace) -> Path:
    """The file or folder behind `dataset`: 'demo', a workspace dataset name, or a path."""
    if name == "demo":
        from backend.data.demo_rows import ensure_demo_dataset

        return ensure_demo_dataset(workspace.datasets_dir)
    if name == "demo-pairs":
        from backend.data.demo_pairs import ensure_demo_pairs

        return ensure_demo_pairs(workspace.datasets_dir)
    named = workspace.datasets_dir / name
    if _is_plain_name(name) and is_workspace_dataset(named):
        return named
    path = Path(name).expanduser()
    if path.exists():
        return path
    raise DatasetNotFound(f"Dataset {name!r} not found: no file or folder {path.resolve()} "
                          f"and no workspace dataset {named}.")


def _is_plain_name(name: str) -> bool:
    try:
        validate_name(name)
    except ValueError:
        return False
    return True


def check_dataset(name: str, workspace: Workspace, dataset_name: str | None = None, stage: str = "sft") -> Path:
    """Resolve the dataset and open it (cheap: the first record only), so a
    file the data backend cannot read fails before torch is imported.
    `dataset_name` picks one dataset of a LLaMA-Factory folder."""
    from backend.data.load import open_source

    source = resolve_dataset(name, workspace)
    if dataset_name and (is_workspace_dataset(source) or not source.is_dir()):
        raise ConfigError(msg("config.dataset_name", dataset_name=dataset_name, dataset=name))
    if not is_workspace_dataset(source) or stage != "sft":
        try:
            shape = open_source(source, dataset=dataset_name).shape.name
        except DataError as error:
            raise DatasetUnreadable(str(error)) from error
        if stage != "sft":
            from backend.training.preference import check_shape

            check_shape(shape, stage, name)
    return source


def load_rows(source: Path, counts: RowCounts | None = None,
              dataset_name: str | None = None) -> tuple[list[dict], list[dict] | None]:
    """(rows, eval rows or None) in canonical form from a file, a workspace
    dataset folder or one dataset (`dataset_name`) of a LLaMA-Factory folder.
    Unusable rows are left out and, with `counts`, counted."""
    source = Path(source)
    try:
        if is_workspace_dataset(source):
            eval_rows = load_dataset_rows(source, split="eval") if (source / EVAL_FILE).is_file() else None
            return load_dataset_rows(source, split="train"), eval_rows
        if source.is_dir() and not (source / DATASET_INFO).is_file():
            load_dataset_rows(source)  # a folder that is no dataset: the data backend's own refusal
        from backend.data.load import load_rows as load_file

        loaded = load_file(source, dataset=dataset_name)
    except DataError as error:
        raise DatasetUnreadable(str(error)) from error
    if loaded.rejected:
        log.warning("%d of %d rows of %s are unusable and skipped; `python -m backend.data check %s` lists them",
                    len(loaded.rejected), loaded.total, source, source)
        if counts is not None:
            counts.total += len(loaded.rejected)
            counts.drop(SCHEMA_REASON, len(loaded.rejected))
    return loaded.rows, None


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


def build_datasets(tokenizer, config: RunConfig, workspace: Workspace):
    """(train Dataset, eval Dataset or None, RowCounts)."""
    from datasets import Dataset

    counts = RowCounts()
    rows, eval_rows = load_rows(resolve_dataset(config.dataset, workspace), counts, config.dataset_name)
    if eval_rows is None and config.val_size > 0:
        rows, eval_rows = split_rows(rows, config.val_size, config.seed)
    if config.val_size == 0:
        eval_rows = None  # the user turned evaluation off
    train = encode_rows(tokenizer, rows, config, counts)
    evaluation = encode_rows(tokenizer, eval_rows, config, counts) if eval_rows else []
    counts.train, counts.eval = len(train), len(evaluation)
    if not train:
        raise ValueError(f"No training rows left out of {counts.total} ({counts.reasons}); "
                         f"raise cutoff_len or set overflow to truncate.")
    return Dataset.from_list(train), (Dataset.from_list(evaluation) if evaluation else None), counts
