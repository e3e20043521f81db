"""Workspace datasets: the cleaned, canonical result of load + fixes, saved with
its provenance, and read back by the trainer.

Layout of workspace/datasets/<name>/ (docs/CONTRACTS.md, the workspace):
  data.jsonl   the TRAIN rows, one canonical {"messages": [...]} per line
  eval.jsonl   the held-out EVAL rows (present only when eval_ratio > 0)
  meta.json    source file path + sha256, detected format, fixes with their
               counts, rows before / after, the split (seed, ratio, counts)
The folder is written under a temporary name and renamed into place, so a
dataset folder with meta.json is always complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from backend.data.errors import DataError
from backend.data.load import load_file_rows
from backend.messages import UserError, msg
from backend.storage.safe_names import checked_name

TRAIN_FILE, EVAL_FILE, META_FILE = "data.jsonl", "eval.jsonl", "meta.json"
MAX_NAME = 64  # characters of a dataset name (its folder's name)


class DatasetRefused(UserError, ValueError):
    """A dataset that cannot be saved as asked; the message is catalogued (backend/messages.py)."""


class DatasetExists(UserError, FileExistsError):
    """A dataset of that name exists and overwrite was not asked for."""


def validate_name(name: str) -> str:
    """A dataset name is one plain folder name: no separators, no '..', no hidden names."""

    return checked_name(name, msg("name.dataset"), MAX_NAME)


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def split_positions(count: int, eval_ratio: float, seed: int) -> tuple[list[int], list[int]]:
    """Positions of the train and eval rows: a seeded shuffle, each part kept in file order."""
    if not 0 <= eval_ratio < 1:
        raise DatasetRefused(msg("data.eval_ratio", value=eval_ratio))
    n_eval = round(count * eval_ratio)
    if eval_ratio > 0 and count >= 2:
        n_eval = min(max(n_eval, 1), count - 1)
    order = list(range(count))
    random.Random(seed).shuffle(order)
    eval_set = set(order[:n_eval])
    return [i for i in range(count) if i not in eval_set], sorted(eval_set)


def save_dataset(
    datasets_dir: str | Path,
    name: str,
    rows: list[dict],
    *,
    source: dict,
    fixes: list[dict],
    rows_before: int,
    eval_ratio: float = 0.0,
    seed: int = 42,
    overwrite: bool = False,
) -> Path:
    """Write the dataset folder; `source` holds at least {"path", "sha256"}."""
    validate_name(name)
    if not rows:
        raise DatasetRefused(msg("data.nothing_left"))
    datasets_dir = Path(datasets_dir)
    datasets_dir.mkdir(parents=True, exist_ok=True)
    target = datasets_dir / name
    if target.exists() and not overwrite:
        raise DatasetExists(msg("data.exists", name=name, folder=datasets_dir))
    train, held_out = split_positions(len(rows), eval_ratio, seed)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=datasets_dir))
    try:
        _write_jsonl(staging / TRAIN_FILE, (rows[i] for i in train))
        if held_out:
            _write_jsonl(staging / EVAL_FILE, (rows[i] for i in held_out))
        meta = {
            "name": name,
            "created": time.time(),
            "source": source,
            "fixes": fixes,
            "rows_before": rows_before,
            "rows_after": len(rows),
            "split": {
                "seed": seed,
                "eval_ratio": eval_ratio,
                "train_rows": len(train),
                "eval_rows": len(held_out),
                "train_file": TRAIN_FILE,
                "eval_file": EVAL_FILE if held_out else None,
            },
        }
        (staging / META_FILE).write_text(json.dumps(meta, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _write_jsonl(path: Path, rows) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def is_workspace_dataset(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / META_FILE).is_file() and (path / TRAIN_FILE).is_file()


def saved_or_file(path: Path) -> bool:
    """True for a workspace dataset folder, False for what the data backend reads (a data file or a
    LLaMA-Factory folder); a folder that is neither is refused with its sentence. The one place that
    decides it, for the worker (resolve.load_rows) and for every other reader (load_dataset_rows)."""
    if is_workspace_dataset(path):
        return True
    if path.is_dir() and not (path / "dataset_info.json").is_file():
        raise DataError(path, msg("data.not_workspace_dataset", meta=META_FILE, train=TRAIN_FILE),
                        msg("data.hint.workspace_dataset"))
    return False


def load_dataset_rows(path: str | Path, split: str = "train", mapping: dict[str, str] | None = None) -> list[dict]:
    """Canonical rows of a workspace dataset folder (its train or eval split) or of any data file.

    For a plain file `split` is ignored: every usable row is returned (rows with
    schema problems are left out, as the check reports them).
    """
    path = Path(path)
    if saved_or_file(path):
        if split not in ("train", "eval"):
            raise ValueError(f"split must be 'train' or 'eval', not {split!r}")
        file = path / (TRAIN_FILE if split == "train" else EVAL_FILE)
        if not file.is_file():
            return []
        with open(file, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    return load_file_rows(path, mapping).rows


def list_workspace_datasets(datasets_dir: str | Path) -> list[dict]:
    """meta.json of every complete dataset, newest first (plus its folder as "path")."""
    datasets_dir = Path(datasets_dir)
    if not datasets_dir.is_dir():
        return []
    found = []
    for folder in datasets_dir.iterdir():
        if folder.name.startswith(".") or not is_workspace_dataset(folder):
            continue
        try:
            meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found.append({**meta, "name": folder.name, "path": str(folder)})
    return sorted(found, key=lambda m: m.get("created", 0), reverse=True)
