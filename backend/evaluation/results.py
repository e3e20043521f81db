"""Reading evaluation results back: which checkpoints a run offers, their
metrics and predictions, the best checkpoint per metric, the training
eval-loss curve, and the rows where checkpoints disagree most. Plain data for
the Evaluate tab and the model card; no model is loaded here."""

from __future__ import annotations

import json
import math
from pathlib import Path

from backend.messages import msg
from backend.runs.files import (
    BASE,
    EVAL_DIR,
    FINAL_DIR,
    METRICS_FILE,
    SUMMARY_FILE,
    checkpoint_step,
    is_complete,
    list_checkpoints,
)
from backend.storage.atomic_files import read_json
from backend.storage.safe_names import checked_name

PROGRESS_FILE = "progress.json"
# Metric -> True when lower is better.
METRICS = {"eval_loss": True, "perplexity": True, "bleu": False, "rouge1": False, "rouge2": False,
           "rougeL": False, "exact_match": False,
           # preference runs (backend/evaluation/pair_scores.py)
           "preference_accuracy": False, "mean_margin": False, "logp_accuracy": False}


def checkpoint_choices(run_dir: Path) -> list[str]:
    """'base', every complete checkpoint-<step> by step, then 'final' when complete."""
    names = [BASE] + [p.name for p in list_checkpoints(run_dir, complete_only=True)]
    if is_complete(Path(run_dir) / FINAL_DIR):
        names.append(FINAL_DIR)
    return names


def default_checkpoint(run_dir: Path) -> str | None:
    """The checkpoint Export and Evaluate offer first: the best by eval loss while it is complete
    (summary.json's at the end; while the run trains, the Trainer's best_model_checkpoint in the
    newest trainer_state.json), else final/, else the newest checkpoint; None without any."""
    choices = [name for name in checkpoint_choices(run_dir) if name != BASE]
    best = (read_json(Path(run_dir) / SUMMARY_FILE, {}) or {}).get("best_checkpoint")
    complete = list_checkpoints(run_dir, complete_only=True)
    if not best and complete:
        best = Path((read_json(complete[-1] / "trainer_state.json", {}) or {}).get("best_model_checkpoint") or "").name
    if best in choices:
        return best
    return FINAL_DIR if FINAL_DIR in choices else (choices[-1] if choices else None)


def chosen_checkpoints(run_dir: Path, checkpoints: list[str] | None, error: type[Exception]) -> list[str]:
    """`checkpoints` in the run's order (base first, then by step; none given: all of them), or
    `error` (the caller's own kind: evaluation or benchmark) naming the unknown ones and the choices."""

    available = checkpoint_choices(run_dir)
    checkpoints = checkpoints or available
    unknown = [c for c in checkpoints if c not in available]
    if unknown:
        raise error(msg("evaluate.unknown_checkpoint", names=", ".join(unknown), run=Path(run_dir).name,
                        available=", ".join(available)))
    return [c for c in available if c in checkpoints]


def checkpoint_folder(run_dir: Path, name: str) -> Path:
    return Path(run_dir) / checked_name(name, msg("name.checkpoint"))  # names arrive from the UI and CLI


def step_of(run_dir: Path, name: str) -> int:
    """Training step of a checkpoint name: 0 for the base, the last step for final."""
    if name == BASE:
        return 0
    if name.startswith("checkpoint-"):
        return checkpoint_step(Path(name))
    state = read_json(Path(run_dir) / name / "trainer_state.json", default={}) or {}
    summary = read_json(Path(run_dir) / SUMMARY_FILE, default={}) or {}
    for value in (state.get("global_step"), summary.get("global_step"), summary.get("steps")):
        if isinstance(value, int):
            return value
    steps = [checkpoint_step(p) for p in list_checkpoints(run_dir)]
    return max(steps, default=0)


def load_results(run_dir: Path) -> dict[str, dict]:
    """{checkpoint name: metrics.json} for every evaluated checkpoint, ordered by step."""
    folder = Path(run_dir) / EVAL_DIR
    results = {}
    if folder.is_dir():
        for sub in folder.iterdir():
            metrics = read_json(sub / "metrics.json", default=None) if sub.is_dir() else None
            if metrics:
                results[sub.name] = metrics
    return dict(sorted(results.items(), key=lambda item: (item[1].get("step", 0), item[0] == FINAL_DIR)))


def load_predictions(run_dir: Path, name: str) -> list[dict]:
    path = Path(run_dir) / EVAL_DIR / name / "predictions.jsonl"
    try:
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except FileNotFoundError:
        return []


def best_per_metric(results: dict[str, dict]) -> dict[str, str]:
    """{metric: checkpoint name with the best value} over the evaluated checkpoints
    (metrics where every checkpoint scores the same are left out)."""
    best = {}
    for metric, lower in METRICS.items():
        scored = [(m[metric], name) for name, m in results.items()
                  if isinstance(m.get(metric), (int, float)) and math.isfinite(m[metric])]
        if len({value for value, _ in scored}) > 1:  # a tie everywhere has no best
            best[metric] = (min(scored) if lower else max(scored, key=lambda s: s[0]))[1]
    return best


def training_eval_curve(run_dir: Path) -> list[tuple[int, float]]:
    """(step, eval_loss) logged during training: metrics.jsonl, else the newest trainer_state.json."""
    points = []
    try:
        with open(Path(run_dir) / METRICS_FILE, encoding="utf-8") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if record.get("eval_loss") is not None and record.get("step") is not None:
                    points.append((int(record["step"]), float(record["eval_loss"])))
    except FileNotFoundError:
        pass
    if not points:
        for folder in reversed([*list_checkpoints(run_dir), Path(run_dir) / FINAL_DIR]):
            history = (read_json(folder / "trainer_state.json", default={}) or {}).get("log_history", [])
            points = [(int(h["step"]), float(h["eval_loss"])) for h in history if "eval_loss" in h]
            if points:
                break
    return sorted(dict(points).items())


def disagreement_rows(run_dir: Path, names: list[str]) -> list[dict]:
    """One row per evaluated example with every checkpoint's prediction, most-disagreeing first.

    Disagreement = number of distinct answers, then the spread of ROUGE-L
    between the best and the worst checkpoint on that row."""
    predictions = {name: load_predictions(run_dir, name) for name in names}
    predictions = {name: rows for name, rows in predictions.items() if rows}
    if not predictions:
        return []
    count = min(len(rows) for rows in predictions.values())
    table = []
    for i in range(count):
        first = next(iter(predictions.values()))[i]
        answers = {name: rows[i]["prediction"] for name, rows in predictions.items()}
        rouge = [rows[i].get("rougeL", 0.0) for rows in predictions.values()]
        table.append({"index": i, "prompt": first["prompt"], "reference": first["reference"], **answers,
                      "distinct": len(set(answers.values())), "rougeL_spread": max(rouge) - min(rouge)})
    return sorted(table, key=lambda r: (-r["distinct"], -r["rougeL_spread"], r["index"]))
