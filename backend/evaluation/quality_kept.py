"""Quality kept after a stage that continues another run: a run whose config
names `init_adapter` (dpo / orpo / simpo / kto over an SFT run, and any later
stage that starts from a run's adapter) is compared with that parent.

The parent's checkpoint the run started from and each evaluated checkpoint of
the run answer the same rows, greedily, scored the same way
(scoring.answer_metrics: eval loss over the answer tokens, BLEU / ROUGE /
exact match, and the share of answers that ended before max_new_tokens):

* the parent run's held-out split, cut at the parent's cutoff_len: what the
  parent was trained and judged on;
* a parent without one (val_size 0, its run folder gone, or an adapter folder
  that is no run's) gives way to this run's held-out pairs as prompt -> chosen
  answer.

The preference accuracy of the run's checkpoints comes from the pair scores;
the parent is the run's reference, so its own accuracy is 0.5 by definition
(pair_scores.py) and its log-prob accuracy says how often it already ranked
the pair right. Benchmark results are put beside them when the run folder
holds some (quality_drops.benchmark_scores).

Written to eval/kept.json, the predictions of each model to
eval/kept/<name>.jsonl ("parent" for the parent). Whether a number fell too far
is judged when it is read (quality_drops.py), so the thresholds are not frozen
into the file.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from backend.config import RunConfig
from backend.evaluation.results import BASE, EVAL_DIR, step_of
from backend.evaluation.scoring import EvalError, ModelSet, answer_metrics, held_out_rows, rows_hash
from backend.learning.questions import answer_rows as as_answer_rows
from backend.messages import UserError, msg
from backend.runs.files import CONFIG_FILE
from backend.runs.jobs import write_progress
from backend.runs.workspace import Workspace
from backend.storage.atomic_files import atomic_write_json, atomic_write_text, read_json

KEPT_FILE = "kept.json"
KEPT_DIR = "kept"
PARENT = "parent"
PARENT_ADAPTER = "parent"  # the parent's adapter attached under this name (pair scores use "reference")


@dataclass
class Parent:
    folder: Path  # the adapter folder init_adapter names (RUN/final, RUN/checkpoint-N)
    run_dir: Path | None  # its run folder, when the adapter sits in one

    @property
    def label(self) -> str:
        return f"{self.run_dir.name}/{self.folder.name}" if self.run_dir else str(self.folder)


def parent_of(run_dir: Path, workspace: Workspace | None = None) -> Parent | None:
    """The run this one continues, or None for a run that started from the base model."""
    from backend.training.preference import init_adapter_dir

    config = RunConfig.load(Path(run_dir) / CONFIG_FILE)
    if not config.init_adapter:
        return None
    try:
        folder = init_adapter_dir(config, workspace or Workspace.for_run_dir(run_dir)).resolve()
    except UserError as error:  # the parent's adapter was deleted since: say so, compare nothing
        raise EvalError(msg("kept.parent_gone", adapter=config.init_adapter, error=error)) from None
    run = folder.parent if (folder.parent / CONFIG_FILE).is_file() else None
    return Parent(folder, run)


def comparison_rows(run_dir: Path, parent: Parent, max_samples: int | None,
                    workspace: Workspace | None = None) -> tuple[list[dict], str, int]:
    """(rows, where they came from, cutoff_len to score them at)."""
    if parent.run_dir is not None:
        try:
            rows = as_answer_rows(held_out_rows(parent.run_dir, workspace))
            cutoff = RunConfig.load(parent.run_dir / CONFIG_FILE).cutoff_len
        except UserError:  # no split, or its dataset is gone: fall back to this run's pairs
            rows = []
        if rows:
            return rows[:max_samples] if max_samples else rows, str(msg("kept.data.parent_split",
                                                                          run=parent.run_dir.name)), cutoff
    rows = as_answer_rows(held_out_rows(run_dir, workspace))
    if not rows:
        raise EvalError(msg("kept.no_rows", run=Path(run_dir).name, parent=parent.label))
    config = RunConfig.load(Path(run_dir) / CONFIG_FILE)
    return rows[:max_samples] if max_samples else rows, str(msg("kept.data.own_pairs")), config.cutoff_len


def compare_with_parent(run_dir: Path, checkpoints: list[str], settings: dict, pair_summary: dict | None = None,
                        max_samples: int | None = None, progress: Path | None = None,
                        workspace: Workspace | None = None) -> dict | None:
    """Score the parent and `checkpoints` of a continuing run side by side; writes eval/kept.json.
    None for a run without a parent."""
    run_dir = Path(run_dir)
    parent = parent_of(run_dir, workspace)
    names = [name for name in checkpoints if name != BASE]
    if parent is None or not names:
        return None
    rows, label, cutoff = comparison_rows(run_dir, parent, max_samples, workspace)
    kept_settings = {"data": label, "data_hash": rows_hash(rows), "max_new_tokens": settings["max_new_tokens"],
                     "cutoff_len": cutoff, "parent_split": label != str(msg("kept.data.own_pairs"))}
    old = read_json(run_dir / EVAL_DIR / KEPT_FILE, default={}) or {}
    same = old.get("settings") == kept_settings and (old.get("parent") or {}).get("folder") == str(parent.folder)
    config = RunConfig.load(run_dir / CONFIG_FILE)
    write_progress(progress, stage=msg("kept.stage", parent=parent.label))
    models = ModelSet(run_dir, config, workspace)
    if same and old["parent"].get("metrics"):
        parent_metrics = old["parent"]["metrics"]
    else:
        parent_metrics = _scored(models.adapter_model(parent.folder, PARENT_ADAPTER), models, rows, cutoff, settings,
                                 run_dir, PARENT)
    if pair_summary and pair_summary.get("reference_scores"):
        parent_metrics = {**parent_metrics, **pair_summary["reference_scores"]}
    children = dict(old.get("checkpoints", {})) if same else {}
    for name in names:
        write_progress(progress, stage=msg("kept.stage_checkpoint", name=name, parent=parent.label))
        metrics = _scored(models.model_for(name), models, rows, cutoff, settings, run_dir, name)
        pair = ((pair_summary or {}).get("results") or {}).get(name, {})
        metrics.update({k: pair[k] for k in ("preference_accuracy", "mean_margin", "logp_accuracy") if k in pair})
        children[name] = {"step": step_of(run_dir, name), **metrics}
    kept = {"run": run_dir.name, "stage": config.stage,
            "parent": {"label": parent.label, "folder": str(parent.folder),
                       "run": parent.run_dir.name if parent.run_dir else None, "metrics": parent_metrics},
            "settings": kept_settings, "num_samples": len(rows), "checkpoints": children, "time": time.time()}
    atomic_write_json(run_dir / EVAL_DIR / KEPT_FILE, kept)
    return kept


def _scored(model, models, rows, cutoff: int, settings: dict, run_dir: Path, name: str) -> dict:
    """answer_metrics of one model; its predictions to eval/kept/<name>.jsonl."""
    metrics, lines = answer_metrics(model, models.tokenizer, rows, cutoff, settings)
    folder = run_dir / EVAL_DIR / KEPT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / f"{name}.jsonl", "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return {k: v for k, v in metrics.items() if k not in ("bleu_tokenize", "rouge_tokenization")}


def load_kept(run_dir: Path) -> dict | None:
    """eval/kept.json of a run, or None when it was never compared with its parent."""
    return read_json(Path(run_dir) / EVAL_DIR / KEPT_FILE, default=None) or None


def load_kept_predictions(run_dir: Path, name: str) -> list[dict]:
    path = Path(run_dir) / EVAL_DIR / KEPT_DIR / f"{name}.jsonl"
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (FileNotFoundError, json.JSONDecodeError):
        return []
