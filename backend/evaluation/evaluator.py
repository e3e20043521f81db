"""Per-checkpoint evaluation: eval loss / perplexity over the assistant tokens,
and greedy answers scored with BLEU, ROUGE-1/2/L and exact match, and with the
scorers the user chose (backend/scoring/: per row in predictions.jsonl, the
share passing each per checkpoint in metrics.json); the command line is cli.py
(`python -m backend.evaluate`), the scoring of one model scoring.py.

Results land in the run folder, one folder per checkpoint ("base" for the
base model): eval/<checkpoint>/metrics.json and predictions.jsonl, so they
survive restarts. The UI starts this module as a detached background process
(`start_evaluation`) and polls eval/progress.json; it never evaluates inside
a UI event.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from backend.config import RunConfig
from backend.data.identity_rows import identity_values
from backend.evaluation.pair_scores import pair_logps, preference_scores, reference_model
from backend.evaluation.quality_kept import compare_with_parent
from backend.evaluation.results import EVAL_DIR, PROGRESS_FILE, chosen_checkpoints, step_of
from backend.evaluation.scoring import EvalError, ModelSet, answer_metrics, chosen_scorers, evaluation_rows, rows_hash
from backend.messages import UserError, msg
from backend.runs.files import CONFIG_FILE
from backend.runs.jobs import RUNNING, launch_job, read_progress, write_progress
from backend.runs.workspace import Workspace
from backend.storage.atomic_files import atomic_write_json, atomic_write_text

DEFAULT_MAX_NEW_TOKENS = 128
DEFAULT_BATCH_SIZE = 8


def evaluate_checkpoint(models: ModelSet, name: str, rows: list[dict], settings: dict, report=None,
                        scorers: list = ()) -> dict:
    """Score one checkpoint; writes eval/<name>/metrics.json + predictions.jsonl and returns the metrics.
    `scorers`: the user's chosen checks (backend/scoring/), parsed once by evaluate_run."""
    started = time.time()
    identity = tuple(identity_values(models.config).values())  # the facts an identity answer must name
    scores, lines = answer_metrics(models.model_for(name), models.tokenizer, rows, models.config.cutoff_len,
                                   settings, report, scorers, identity)
    metrics = {"checkpoint": name, "step": step_of(models.run_dir, name), **scores, "num_samples": len(rows),
               **settings, "time": time.time(), "seconds": round(time.time() - started, 2)}
    folder = Path(models.run_dir) / EVAL_DIR / name
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "predictions.jsonl", "".join(json.dumps(line, ensure_ascii=False) + "\n"
                                                             for line in lines))
    atomic_write_json(folder / "metrics.json", metrics)
    return metrics


def evaluate_run(run_dir: Path, checkpoints: list[str] | None = None, data: Path | None = None,
                 max_samples: int | None = None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                 batch_size: int = DEFAULT_BATCH_SIZE, progress: Path | None = None,
                 workspace: Workspace | None = None, scorers: list[dict] | str | None = None) -> dict:
    """Evaluate `checkpoints` (default: base and every complete checkpoint) of a run. `workspace`: where
    config.yaml's model and dataset are found (default: the one that holds the run folder). `scorers`:
    scorer specs (backend/scoring/scorer_specs.py) or their YAML / JSON text, scored on every answer."""
    run_dir = Path(run_dir).resolve()
    if not (run_dir / CONFIG_FILE).is_file():
        raise EvalError(msg("evaluate.not_run", path=run_dir, config=CONFIG_FILE))
    specs, parsed = chosen_scorers(scorers)  # refused here, before any model loads
    checkpoints = chosen_checkpoints(run_dir, checkpoints, EvalError)
    workspace = workspace or Workspace.for_run_dir(run_dir)
    rows, label = evaluation_rows(run_dir, data, max_samples, workspace)
    settings = {"data": label, "data_hash": rows_hash(rows), "max_new_tokens": max_new_tokens,
                "batch_size": batch_size}  # the chosen scorers' specs are in each metrics.json's "scorers"
    if "chosen" in rows[0] and specs:
        raise EvalError(msg("evaluate.scorers_on_pairs", label=label))
    if "chosen" in rows[0]:
        return with_parent(evaluate_pairs(run_dir, checkpoints, rows, settings, progress, workspace), run_dir,
                           checkpoints, settings, data, max_samples, progress, workspace)
    total = 2 * len(rows) * len(checkpoints)  # units: rows scored for loss + rows answered, per checkpoint
    write_progress(progress, stage=msg("evaluate.stage.loading"), total=total, checkpoints=checkpoints, data=label)
    models = ModelSet(run_dir, RunConfig.load(run_dir / CONFIG_FILE), workspace)
    results = {}
    for k, name in enumerate(checkpoints):
        write_progress(progress, stage=msg("evaluate.stage.checkpoint", name=name), done=2 * len(rows) * k)

        def report(units: int, offset: int = 2 * len(rows) * k) -> None:
            write_progress(progress, done=offset + units, total=total)

        results[name] = evaluate_checkpoint(models, name, rows, settings, report, parsed)
    summary = {"run": run_dir.name, "data": label, "num_samples": len(rows), "results": results}
    return with_parent(summary, run_dir, checkpoints, settings, data, max_samples, progress, workspace)


def with_parent(summary: dict, run_dir: Path, checkpoints: list[str], settings: dict, data: Path | None,
                max_samples: int | None, progress, workspace: Workspace | None = None) -> dict:
    """`summary` with "kept": a run that continues another is scored beside its parent
    (backend/evaluation/quality_kept.py). Only on the held-out data: an uploaded file is the user's own test."""
    if data is not None:
        return summary
    try:
        kept = compare_with_parent(run_dir, checkpoints, settings, summary, max_samples, progress, workspace)
    except EvalError as error:  # the checkpoints' own scores are written; the comparison says why it is missing
        return {**summary, "kept_error": str(error)}
    return {**summary, "kept": kept} if kept else summary


def evaluate_pairs(run_dir: Path, checkpoints: list[str], rows: list[dict], settings: dict, progress,
                   workspace: Workspace | None = None) -> dict:
    """Preference accuracy and mean margin per checkpoint (backend/evaluation/pair_scores.py)."""
    from backend.training.preference import init_adapter_dir

    config = RunConfig.load(run_dir / CONFIG_FILE)
    workspace = workspace or Workspace.for_run_dir(run_dir)
    write_progress(progress, stage="loading the model", total=len(checkpoints) + 1, checkpoints=checkpoints,
                   data=settings["data"])
    try:
        adapter = init_adapter_dir(config, workspace)
    except UserError as error:  # the adapter this run continued was deleted: no reference to score against
        raise EvalError(msg("evaluate.reference_gone", adapter=config.init_adapter, error=error)) from None
    models = ModelSet(run_dir, config, workspace)
    batch = settings["batch_size"]
    reference = pair_logps(reference_model(models, adapter), models.tokenizer, rows, config.cutoff_len, batch)
    # A continued run's reference is its parent: scored against itself (accuracy 0.5, margin 0; its own
    # log-prob accuracy), the parent's column of the comparison (quality_kept.py).
    reference_scores = preference_scores(reference, reference, config.beta) if adapter else None
    results = {}
    for k, name in enumerate(checkpoints):
        write_progress(progress, stage=f"evaluating {name}", done=k + 1)
        started = time.time()
        policy = pair_logps(models.model_for(name), models.tokenizer, rows, config.cutoff_len, batch)
        metrics = {"checkpoint": name, "step": step_of(run_dir, name), "stage": config.stage,
                   **preference_scores(policy, reference, config.beta), "num_samples": len(rows), **settings,
                   "reference": str(adapter) if adapter else "base", "time": time.time(),
                   "seconds": round(time.time() - started, 2)}
        folder = run_dir / EVAL_DIR / name
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / "metrics.json", metrics)
        results[name] = metrics
    return {"run": run_dir.name, "data": settings["data"], "num_samples": len(rows), "results": results,
            "reference_scores": reference_scores}


# ---------------------------------------------------------------- background job

def evaluation_progress_path(run_dir: Path) -> Path:
    return Path(run_dir) / EVAL_DIR / PROGRESS_FILE


def start_evaluation(run_dir: Path, checkpoints: list[str], data: Path | None = None,
                     max_samples: int | None = None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                     scorers: list[dict] | None = None) -> int:
    """Launch `python -m backend.evaluate` detached; refuses while one runs for this run (and a bad
    scorer spec, before anything starts)."""
    run_dir = Path(run_dir)
    if read_progress(evaluation_progress_path(run_dir)).get("state") == RUNNING:
        raise EvalError(msg("evaluate.running", run=run_dir.name))
    if not checkpoints:
        raise EvalError(msg("evaluate.choose"))
    specs, _ = chosen_scorers(scorers)
    args = ["--run", str(run_dir), "--checkpoint", *checkpoints, "--max-new-tokens", str(max_new_tokens)]
    if specs:
        args += ["--scorers", json.dumps(specs, ensure_ascii=False)]  # one argument (no shell): JSON is YAML
    if data is not None:
        args += ["--data", str(data)]
    if max_samples:
        args += ["--max-samples", str(max_samples)]
    evaluation_progress_path(run_dir).unlink(missing_ok=True)
    return launch_job("backend.evaluate", args, Path(run_dir) / EVAL_DIR / "eval.log", evaluation_progress_path(run_dir))
