"""A judgement on disk: RUN/eval/judge/<name>.json holds the result, the
endpoint (URL and model; never the key), the template and rubric used, the
call counts, and every call's prompt, raw answer, parsed verdict and reason."""

from __future__ import annotations

import time
from pathlib import Path

from backend.judge.asking import Asker
from backend.judge.calibration import judge_dir
from backend.messages import UserError, msg
from backend.storage.atomic_files import atomic_write_json, read_json
from backend.storage.safe_names import is_plain_name


def default_name(result: dict) -> str:
    if result["mode"] == "pairwise":
        return f"pairwise-{result['a']}-vs-{result['b']}"
    return result["mode"] if result["mode"] != "graded" else "graded-" + "-".join(result["checkpoints"])[:80]


def write_result(run_dir: Path, result: dict, asker: Asker, template: str, name: str | None = None) -> Path:
    name = name or default_name(result)
    if not is_plain_name(name):
        raise UserError(msg("judge.bad_name", name=name))
    endpoint = asker.client.endpoint
    record = {**result, "name": name, "time": time.time(),
              "judge": {"url": endpoint.base_url, "model": endpoint.model}, "template": template,
              "calls": asker.calls, "from_cache": asker.from_cache, "unparsed_calls": asker.unparsed,
              "records": [r.as_dict() for r in asker.records]}
    path = judge_dir(run_dir) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, record)
    return path


def load_results(run_dir: Path) -> dict[str, dict]:
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
    pairwise = [r for r in load_results(run_dir).values() if r.get("mode") == "pairwise" and r.get("win_rate") is not None]
    return float(pairwise[-1]["win_rate"]) if pairwise else None
