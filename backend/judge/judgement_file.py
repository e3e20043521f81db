"""A judgement on disk: RUN/eval/judge/<name>.json holds the result, the
endpoint (URL and model; never the key), the template and rubric used, the
call counts, and every call's prompt, raw answer, parsed verdict and reason."""

from __future__ import annotations

import time
from pathlib import Path

from backend.evaluation.judge_results import judge_dir
from backend.judge.asking import Asker
from backend.messages import UserError, msg
from backend.storage.atomic_files import atomic_write_json
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
