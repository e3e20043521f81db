"""The sweep table: one row per run of a sweep (swept values, target, time, tokens/s, peak memory)
and the best run by the sweep's target and direction. Plain data from the run folders; the Runs
tab and the command line render it.

Where the target comes from: eval_loss is the run's best evaluation during training (summary.json
best_eval_loss; else Evaluate's eval_loss), train_loss its last logged loss, judge_win_rate the
win rate of the run's newest pairwise judgement (RUN/eval/judge/, backend/judge/); any other target is
what Evaluate computed (eval/<checkpoint>/metrics.json), the best of the run's evaluated
checkpoints. A run without the number (not finished, not evaluated yet) has no target and is
never the best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from backend.evaluation.judge_results import latest_win_rate
from backend.evaluation.results import load_results
from backend.runs.files import SUMMARY_FILE, read_status
from backend.runs.workspace import Workspace
from backend.storage.atomic_files import read_json
from backend.sweeps.queueing import read_sweep


@dataclass
class SweepRow:
    run_id: str
    values: dict
    state: str
    target: float | None
    wall_s: float | None
    tokens_per_second: float | None
    peak_memory_gb: float | None
    best: bool = False


@dataclass
class SweepTable:
    sweep_id: str
    fields: list[str]
    target: str
    direction: str
    rows: list[SweepRow] = field(default_factory=list)

    @property
    def best(self) -> SweepRow | None:
        return next((r for r in self.rows if r.best), None)


def target_value(run_dir, target: str, direction: str) -> float | None:
    summary = read_json(run_dir / SUMMARY_FILE, default={}) or {}
    if target == "eval_loss" and _number(summary.get("best_eval_loss")):
        return float(summary["best_eval_loss"])
    if target == "train_loss":
        return float(summary["final_train_loss"]) if _number(summary.get("final_train_loss")) else None
    if target == "judge_win_rate":
        return latest_win_rate(run_dir)
    scores = [m[target] for m in load_results(run_dir).values() if _number(m.get(target))]
    if not scores:
        return None
    return float(min(scores) if direction == "min" else max(scores))


def sweep_table(workspace: Workspace, sweep_id: str) -> SweepTable | None:
    """The table of `sweep_id`, None when the workspace has no such sweep."""
    record = read_sweep(workspace, sweep_id)
    if not record:
        return None
    table = SweepTable(sweep_id, list(record.get("fields") or []), record.get("target", "eval_loss"),
                       record.get("direction", "min"))
    for run in record.get("runs") or []:
        run_dir = workspace.runs_dir / run["run_id"]
        if not run_dir.is_dir():
            continue  # deleted since
        summary = read_json(run_dir / SUMMARY_FILE, default={}) or {}
        peak = summary.get("peak_allocated_gb") or summary.get("peak_rss_gb")
        table.rows.append(SweepRow(run["run_id"], dict(run.get("values") or {}),
                                   read_status(run_dir).get("state") or "unknown",
                                   target_value(run_dir, table.target, table.direction),
                                   summary.get("wall_time_s"), summary.get("train_tokens_per_second"), peak))
    scored = [r for r in table.rows if r.target is not None and r.state == "completed"]
    if scored:
        pick = min if table.direction == "min" else max
        pick(scored, key=lambda r: r.target).best = True
    return table


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
