"""From a run's `dataset` setting to rows: 'identity' / 'demo' / 'demo-pairs', a workspace
dataset name (datasets/<name>/, with its own eval split when it has one), a
file, or one dataset of a LLaMA-Factory folder (`dataset_name`); and the
seeded train / eval split. The worker (backend/training/), the evaluator and
the Train tab's step numbers all resolve datasets here, so they agree on what
a name means and on which rows are held out.

Rows are always read through the data backend (backend/data/load.py), so the
trainer accepts exactly what the Data tab and `python -m backend.data check` accept.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

from backend.config import split_sizes
from backend.config_policy import ConfigError
from backend.data.demo_pairs import ensure_demo_pairs
from backend.data.demo_rows import ensure_demo_dataset
from backend.data.errors import DataError
from backend.data.identity_rows import ensure_identity_dataset
from backend.data.load import load_file_rows, open_source
from backend.data.pairwise import is_preference
from backend.data.prompt_files import read_prompt_file
from backend.data.saved_datasets import (
    EVAL_FILE,
    TRAIN_FILE,
    is_workspace_dataset,
    load_dataset_rows,
    saved_or_file,
    validate_name,
)
from backend.messages import msg
from backend.models.demo_facts import build_demo_rows
from backend.runs.workspace import Workspace

log = logging.getLogger("backend.train")

SCHEMA_REASON = "unusable row (schema problem; see `python -m backend.data check`)"
ROLES_REASON = "roles do not alternate user, assistant (LLaMA-Factory skips such a row too)"
# num_samples draws its rows with numpy's legacy generator, as LLaMA-Factory does (np.random.permutation,
# then np.random.choice for the repeats). LLaMA-Factory's generator is the global one, seeded by the
# run's seed (transformers.set_seed); here a fixed seed, so that the worker, the evaluator's held-out
# split and the Plan, which read the file apart, all draw the same rows.
NUM_SAMPLES_SEED = 42


class DatasetNotFound(FileNotFoundError):
    """The configured dataset names no file, folder or workspace dataset."""


class DatasetUnreadable(DatasetNotFound):
    """The data backend cannot read the dataset at all (its DataError, one sentence)."""


def resolve_dataset(name: str, workspace: Workspace) -> Path:
    """The file or folder behind `dataset`: 'identity', 'demo', a workspace dataset name, or a path."""
    if name == "demo":
        return ensure_demo_dataset(workspace.datasets_dir)
    if name == "identity":
        return ensure_identity_dataset(workspace.datasets_dir)
    if name == "demo-pairs":
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
    `dataset_name` picks one dataset of a LLaMA-Factory folder; the `stage`
    refuses data of the other kind (preference rows for sft, instruction
    rows for a preference stage, kto-only rows for pair stages)."""

    source = resolve_dataset(name, workspace)
    if dataset_name and (is_workspace_dataset(source) or not source.is_dir()):
        raise ConfigError(msg("config.dataset_name", dataset_name=dataset_name, dataset=name))
    if is_workspace_dataset(source):
        check_shape(_saved_shape(source), stage, name)
        return source
    try:
        shape = open_source(source, dataset=dataset_name).shape.name
    except DataError as error:
        if stage == "grpo" and source.is_file() and _prompt_file(source):
            return source  # prompts alone, without answers: grpo reads them itself
        raise DatasetUnreadable(str(error)) from error
    check_shape(shape, stage, f"{name}:{dataset_name}" if dataset_name else name)
    return source


def _prompt_file(source: Path) -> bool:
    try:
        return bool(read_prompt_file(source))
    except (DataError, OSError, ValueError):
        return False


def _saved_shape(folder: Path) -> str:
    """'openai', 'pairwise' or 'kto': the kind of a workspace dataset's canonical rows, from its first
    line (the rows were checked when it was saved, and its file may be large)."""

    with open(folder / TRAIN_FILE, encoding="utf-8") as handle:
        first = next((line for line in handle if line.strip()), "{}")
    row = json.loads(first)
    return "kto" if "completion" in row else "pairwise" if "chosen" in row else "openai"


def check_shape(shape: str, stage: str, source: str) -> None:
    """Refuses data of the wrong kind for the stage (kto also takes pairs) before anything loads."""

    if stage in ("sft", "grpo"):  # grpo: prompts of instruction rows (backend/training/grpo_data.py)
        if is_preference(shape) and stage == "grpo":
            raise ConfigError(msg("config.grpo_on_pairs", source=source, shape=shape))
        if is_preference(shape):
            raise ConfigError(msg("config.sft_on_kto", source=source) if shape == "kto"
                              else msg("config.sft_on_pairs", source=source, shape=shape))
        return
    if not is_preference(shape):
        raise ConfigError(msg("config.stage_needs_preference", stage=stage, source=source, shape=shape))
    if stage != "kto" and shape == "kto":
        raise ConfigError(msg("config.stage_needs_pairs", stage=stage, source=source))


def load_rows(source: Path, counts=None, dataset_name: str | None = None) -> tuple[list[dict], list[dict] | None]:
    """(rows, eval rows or None) in canonical form from a file, a workspace
    dataset folder or one dataset (`dataset_name`) of a LLaMA-Factory folder.
    Unusable rows are left out and, with `counts` (the worker's RowCounts), counted."""
    source = Path(source)
    try:
        if saved_or_file(source):
            eval_rows = load_dataset_rows(source, split="eval") if (source / EVAL_FILE).is_file() else None
            return load_dataset_rows(source, split="train"), eval_rows

        loaded = load_file_rows(source, dataset=dataset_name)
    except DataError as error:
        raise DatasetUnreadable(str(error)) from error
    if loaded.rejected:
        log.warning("%d of %d rows of %s are unusable and skipped; `python -m backend.data check %s` lists them",
                    len(loaded.rejected), loaded.total, source, source)
        if counts is not None:
            counts.total += len(loaded.rejected)
            for item in loaded.rejected:
                counts.drop(ROLES_REASON if _roles_out_of_turn(item.problems) else SCHEMA_REASON)
    rows = sample_rows(loaded.rows, loaded.source.num_samples)
    if len(rows) != len(loaded.rows):
        log.info("num_samples %d of %s: %d rows drawn from its %d usable ones", loaded.source.num_samples,
                 loaded.source.label, len(rows), len(loaded.rows))
    return rows, None


def _roles_out_of_turn(problems) -> bool:
    return any(getattr(message, "id", None) == "row.roles_alternate" for _, message in problems)


def sample_rows(rows: list[dict], num_samples: int | None) -> list[dict]:
    """LLaMA-Factory's num_samples (its loader's rule): fewer than the rows, that many distinct rows of a
    random permutation; more, every row once, in a random order, then random repeats up to the count."""
    if num_samples is None or num_samples == len(rows):
        return rows
    import numpy as np

    generator = np.random.RandomState(NUM_SAMPLES_SEED)
    order = list(generator.permutation(len(rows))[:num_samples])
    if num_samples > len(rows):
        order += list(generator.choice(len(rows), num_samples - len(rows)))
    return [rows[i] for i in order]


def run_split(rows: list[dict], eval_rows: list[dict] | None, config, source: str):
    """(train rows, eval rows or None) of a run: the data's own eval split, else the seeded `val_size`
    split, none at val_size 0. Refused when the split would hold out every row (one pair, one row)."""
    if eval_rows is None and config.val_size > 0:
        held = len(rows)
        rows, eval_rows = split_rows(rows, config.val_size, config.seed)
        if held and not rows:
            raise ConfigError(msg("config.split_leaves_nothing", source=source, rows=held, val_size=config.val_size,
                                  held=len(eval_rows)))
    return rows, (None if config.val_size == 0 else eval_rows)


def split_rows(rows: list[dict], val_size: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Seeded shuffle, then the last `val_size` share is the eval split."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    n_train, _ = split_sizes(len(rows), val_size)
    return [rows[i] for i in order[:n_train]], [rows[i] for i in order[n_train:]]


def dataset_size(name: str, workspace: Workspace, dataset_name: str | None = None) -> tuple[int, bool]:
    """(usable rows, whether it has its own eval split) of 'demo', a workspace dataset or a
    file, before the cutoff filter. A workspace dataset's rows are counted, not parsed."""
    if name in ("", "demo"):
        return len(build_demo_rows()), False
    source = resolve_dataset(name, workspace)
    if is_workspace_dataset(source):
        with open(source / TRAIN_FILE, "rb") as handle:
            return sum(1 for line in handle if line.strip()), (source / EVAL_FILE).is_file()
    rows, eval_rows = load_rows(source, dataset_name=dataset_name)
    return len(rows), eval_rows is not None
