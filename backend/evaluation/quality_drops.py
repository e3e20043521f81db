"""Did a continuing run get worse than its parent? Judged from eval/kept.json
(quality_kept.py) when it is read, for the Runs tab, the Evaluate tab and the
command line; no model is loaded here.

A drop is flagged when the run's checkpoint scores below its parent by more
than the threshold, in points of a 0-100 scale:

  exact_match  10   (on the demo's 27 held-out rows one answer is 3.7 points;
                     the DPO over-fit this guards against lost 20)
  bleu         10   (corpus BLEU; the same over-fit fell from 78 to 27)
  ended        10   (answers that end on the end of turn before max_new_tokens;
                     a run that stops ending answers runs on to the limit)
  benchmark     5   (accuracy of a benchmark task, when both were benchmarked)

The thresholds sit above the noise measured between settings that kept the
answers (docs/PREFERENCE.md, "Quality kept"), and below the drops of the
settings that did not.
"""

from __future__ import annotations

from pathlib import Path

from backend.evaluation.quality_kept import load_kept
from backend.evaluation.results import EVAL_DIR
from backend.messages import Message, msg
from backend.runs.files import FINAL_DIR
from backend.storage.atomic_files import read_json

THRESHOLDS = {"exact_match": 10.0, "bleu": 10.0, "ended": 10.0, "benchmark": 5.0}
# lm-eval results of a checkpoint, when it was benchmarked (backend/evaluation/benchmarks.py):
# RUN/eval/<checkpoint>/benchmarks.json, {"tasks": {task: {"metrics": {...}, "primary": "acc"}}}.
BENCHMARKS_FILE = "benchmarks.json"


def newest_checkpoint(kept: dict) -> str | None:
    """The checkpoint to judge: final when it was compared, else the highest step."""
    checkpoints = kept.get("checkpoints") or {}
    if FINAL_DIR in checkpoints:
        return FINAL_DIR
    return max(checkpoints, key=lambda name: checkpoints[name].get("step", 0), default=None)


def drops(kept: dict | None, checkpoint: str | None = None, benchmarks: dict | None = None,
          thresholds: dict | None = None) -> list[Message]:
    """One sentence per metric on which `checkpoint` (default: the newest) fell below the parent
    beyond its threshold: the metric, both values and what to try."""
    if not kept:
        return []
    thresholds = {**THRESHOLDS, **(thresholds or {})}
    name = checkpoint or newest_checkpoint(kept)
    child = (kept.get("checkpoints") or {}).get(name)
    parent = (kept.get("parent") or {}).get("metrics") or {}
    if child is None:
        return []
    advice = msg("kept.advice")
    where = {"parent": kept["parent"]["label"], "checkpoint": name, "rows": kept.get("num_samples", 0)}
    out = []
    for metric in ("exact_match", "bleu"):
        before, after = parent.get(metric), child.get(metric)
        if _fell(before, after, thresholds[metric]):
            out.append(msg(f"kept.drop.{metric}", before=before, after=after, advice=advice, **where))
    before, after = parent.get("ended"), child.get("ended")
    if _fell(before, after, thresholds["ended"]):
        runs_on = round((100.0 - after) * where["rows"] / 100)
        out.append(msg("kept.drop.ended", before=before, after=after, runs_on=runs_on,
                       max_new_tokens=(kept.get("settings") or {}).get("max_new_tokens"), advice=advice, **where))
    for task, (before, after) in (benchmarks or {}).items():
        if _fell(before, after, thresholds["benchmark"]):
            out.append(msg("kept.drop.benchmark", task=task, before=before, after=after, advice=advice, **where))
    return out


# The rows of the side-by-side table, in order (0-100 scales except the loss and the accuracies).
COMPARED = ("exact_match", "bleu", "rouge1", "rouge2", "rougeL", "eval_loss", "ended", "preference_accuracy",
            "logp_accuracy")


def metrics_beside_parent(kept: dict, benchmarks: dict | None = None) -> tuple[list[str], list[list]]:
    """(column names, rows): one row per metric with the parent's value, then each compared
    checkpoint's by step; benchmark tasks as rows "benchmark:<task>" (parent, newest checkpoint)."""
    checkpoints = sorted(kept.get("checkpoints") or {}, key=lambda n: (kept["checkpoints"][n].get("step", 0),
                                                                        n == FINAL_DIR))
    parent = (kept.get("parent") or {}).get("metrics") or {}
    columns = ["metric", f"parent ({kept['parent']['label']})", *checkpoints]
    rows = []
    for metric in COMPARED:
        values = [parent.get(metric), *[kept["checkpoints"][n].get(metric) for n in checkpoints]]
        if any(isinstance(v, (int, float)) for v in values):
            rows.append([metric, *values])
    newest = newest_checkpoint(kept)
    for task, (before, after) in (benchmarks or {}).items():
        rows.append([f"benchmark:{task}", before, *[after if n == newest else None for n in checkpoints]])
    return columns, rows


def _fell(before, after, threshold: float) -> bool:
    return isinstance(before, (int, float)) and isinstance(after, (int, float)) and before - after > threshold


def run_drops(run_dir: Path) -> list[Message]:
    """The drops of a run's newest compared checkpoint (nothing when it was never compared)."""

    kept = load_kept(run_dir)
    if not kept:
        return []
    return drops(kept, benchmarks=benchmark_pairs(run_dir, kept))


def benchmark_pairs(run_dir: Path, kept: dict) -> dict:
    """{task: (parent's score, the newest checkpoint's score)} on a 0-100 scale, for the tasks both
    were benchmarked on; empty when the run holds no benchmark results."""
    folder = Path(kept["parent"]["folder"])
    newest = newest_checkpoint(kept)
    if not kept["parent"].get("run") or newest is None:
        return {}
    before = _primary_scores(folder.parent / EVAL_DIR / folder.name / BENCHMARKS_FILE)
    after = _primary_scores(Path(run_dir) / EVAL_DIR / newest / BENCHMARKS_FILE)
    # Only where both ran the task alike: the same questions, limit and prompt format.
    return {task: (before[task][0], after[task][0]) for task in before
            if task in after and before[task][1] == after[task][1]}


def _primary_scores(path: Path) -> dict[str, tuple[float, tuple]]:
    """{task: (its primary metric x 100, how it was run)} from one benchmarks.json (lm-eval's scores are 0-1)."""
    record = read_json(path, default=None) or {}
    scores = {}
    for task, entry in (record.get("tasks") or {}).items():
        value = (entry.get("metrics") or {}).get(entry.get("primary"))
        if isinstance(value, (int, float)):
            scores[task] = (100.0 * value, (entry.get("samples"), entry.get("limit"), entry.get("chat_template")))
    return scores


def kept_lines(kept: dict, run_dir: Path) -> list[str]:
    """The comparison as text for the command line: the side-by-side table, then the drops."""
    benchmarks = benchmark_pairs(run_dir, kept)
    columns, rows = metrics_beside_parent(kept, benchmarks)
    width = max(14, *(len(c) + 2 for c in columns[1:]))
    first = max(22, *(len(row[0]) + 2 for row in rows)) if rows else 22
    out = ["", f"Beside the run it continues ({kept['parent']['label']}): {kept['num_samples']} rows of "
               f"{kept['settings']['data']}, max_new_tokens {kept['settings']['max_new_tokens']}",
           f"{columns[0]:<{first}}" + "".join(f"{c:>{width}}" for c in columns[1:])]
    for metric, *values in rows:
        out.append(f"{metric:<{first}}" + "".join(f"{_number(v):>{width}}" for v in values))
    flagged = drops(kept, benchmarks=benchmarks)
    return out + ([f"Drop: {m}" for m in flagged] or ["No drop beyond the thresholds."])


def _number(value) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else "-"
