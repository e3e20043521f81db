"""The training worker as the command line starts it, for tests of its stages (sft, dpo ... grpo)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def worker(workspace, env, *sets: str, run_dir: Path | None = None, args=(), wait=True):
    """`python -m backend.train --recipe demo-tiny --set ...` without --config: the recipe's defaults are the
    base (CLI parity). `args` replaces the recipe and run folder (e.g. --resume); wait=False returns the
    process, its output in a `<run>.out` file beside the run folder."""
    command = [sys.executable, "-m", "backend.train", "--workspace", str(workspace.root)]
    command += list(args) or ["--recipe", "demo-tiny", "--run-dir", str(run_dir)]
    for item in sets:
        command += ["--set", item]
    if not wait:
        with open(Path(run_dir).parent / f"{Path(run_dir).name}.out", "w") as log:
            return subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
    # A limit for a worker that hangs, not a timing: each run ends on its own on a busy machine too.
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)


def records(run_dir: Path, kind: str) -> list[dict]:
    """The metrics.jsonl lines of one kind (train, eval, system ...)."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]
