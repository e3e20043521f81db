"""The default run from Start to "completed", as the app runs it: two checkouts side by side.

The app converts the starter model and answers the replay prompts in the background when it
starts (backend/training/model_stage.py), so Start only trains. This does the same in a fresh
workspace per checkout, then times the worker the app's Start launches (`python -m backend.train
--config RUN.yaml`, the starter defaults, no OMP_NUM_THREADS: the worker picks its own threads)
from launch to exit. Checkouts alternate, the order reversed every repetition, so the machine's
drift falls on both alike. Reports the wall time, the training's tokens/s (summary.json), the
threads the worker chose (train.log) and the load average at launch.

    git worktree add /tmp/before <commit>
    .venv/bin/python bench/default_run.py --checkout before=/tmp/before --checkout after=. --reps 2

Optional `--hog N` keeps N busy processes running beside every run ("beside other work").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def env_for(checkout: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    return dict(env, PYTHONPATH=str(checkout), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")


def prepare(checkout: Path, workspace: Path) -> None:
    """What the app does at start: the model converted, the replay answers cached."""
    (workspace / "models").mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "backend.training.model_stage", "--models", str(workspace / "models"),
                    "--model", "smollm2-135m-instruct", "--replay-cache", str(workspace / "datasets")],
                   cwd=checkout, env=env_for(checkout), check=True, capture_output=True)


def run_once(checkout: Path, workspace: Path, name: str) -> dict:
    config = workspace / "starter.yaml"
    subprocess.run([sys.executable, "-m", "backend.train", "--print-default-config"], cwd=checkout,
                   env=env_for(checkout), check=True, stdout=config.open("w"))
    run_dir = workspace / "runs" / name
    command = [sys.executable, "-m", "backend.train", "--config", str(config), "--run-dir", str(run_dir),
               "--workspace", str(workspace)]
    load = os.getloadavg()[0]
    started = time.monotonic()
    result = subprocess.run(command, cwd=checkout, env=env_for(checkout), capture_output=True, text=True)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"{name} failed:\n{result.stderr[-3000:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    threads = re.search(r"(\d+) CPU thread\(s\)", (run_dir / "train.log").read_text())
    return {"seconds": round(seconds, 1), "tokens_per_s": summary.get("train_tokens_per_second"), "train_s": summary.get("wall_time_s"),
            "steps": summary.get("global_step"), "threads": int(threads.group(1)) if threads else None,
            "load_at_start": round(load, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", action="append", required=True, help="NAME=PATH of a checkout")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--hog", type=int, default=0, help="busy processes beside every run")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    checkouts = [(name, Path(path).resolve()) for name, _, path in (c.partition("=") for c in args.checkout)]
    root = Path(tempfile.mkdtemp(prefix="default-run-"))
    for name, path in checkouts:
        prepare(path, root / name)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hog)]
    results: dict[str, list[dict]] = {name: [] for name, _ in checkouts}
    try:
        for rep in range(args.reps):
            for name, path in checkouts if rep % 2 == 0 else list(reversed(checkouts)):
                measured = run_once(path, root / name, f"rep{rep}")
                results[name].append(measured)
                print(json.dumps({"checkout": name, "rep": rep, **measured}), flush=True)
    finally:
        for hog in hogs:
            hog.kill()
    for name, runs in results.items():
        print(f"{name}: median {statistics.median(r['seconds'] for r in runs):.0f} s, "
              f"{statistics.median(r['tokens_per_s'] or 0 for r in runs):.0f} tokens/s, "
              f"threads {[r['threads'] for r in runs]}")
    if args.out:
        args.out.write_text(json.dumps({"hog": args.hog, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
