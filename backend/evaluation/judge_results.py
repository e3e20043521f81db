"""A run's judgements as they lie on disk (RUN/eval/judge/<name>.json, written by backend/judge/):
read here, below the judge, so a sweep can rank by a judge's win rate without the judge's client."""

from __future__ import annotations

from pathlib import Path

from backend.runs.files import EVAL_DIR
from backend.storage.atomic_files import read_json


def judge_dir(run_dir: Path) -> Path:
    return Path(run_dir) / EVAL_DIR / "judge"


def load_judgements(run_dir: Path) -> dict[str, dict]:
    """{name: result} of the run's judgements, oldest first."""
    folder = judge_dir(run_dir)
    found = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        data = read_json(path, default=None)
        if isinstance(data, dict) and data.get("mode"):
            found[path.stem] = data
    return dict(sorted(found.items(), key=lambda item: item[1].get("time", 0)))


def latest_win_rate(run_dir: Path) -> float | None:
    """The win rate of the run's newest pairwise judgement (a sweep's `judge_win_rate` target), None without one."""
    pairwise = [r for r in load_judgements(run_dir).values()
                if r.get("mode") == "pairwise" and r.get("win_rate") is not None]
    return float(pairwise[-1]["win_rate"]) if pairwise else None
