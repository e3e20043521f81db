"""What a run learned, what it kept, and what its learning report cost, over seeds.

Each seed trains the real worker (`python -m backend.train`, the starter defaults plus
`--set`) in a fresh workspace prepared as the app prepares one at start (the model converted,
the replay answers and the base's general answers cached: backend/training/model_stage.py),
then reads the run's own learning report (RUN/eval/learning.json, backend/learning/) and
summary.json:

* learned / kept / ended of the base and of final/ (the report's figures; tests/test_learning_report.py
  checks them against plain transformers + peft);
* the report's seconds (every scored entry) against the training's (the Trainer's runtime
  without the report's in-training share), and the share that makes.

    .venv/bin/python bench/learning_cost.py --models-dir DIR --seeds 1 2 3 \
        [--dataset ../shared/data/identity.json] [--set identity_name=Orion --set ...] \
        [--prepared /tmp/prepared-smollm2] [--keep OUT]

The sets of docs/DEMO.md's table come from bench/learning_sets.py. Each seed's line also gives the
learned stop's checks (step, right, asked) and how many answers name the template's own identity.

Prints one JSON line per seed, then the mean and spread (min-max) of each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m-instruct"
TEMPLATE_IDENTITY = ("SmolLM", "Hugging Face")


def environment() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")


def prepare(workspace: Path, models_dir: Path, model: str) -> None:
    """The workspace as the app leaves it after start: the model linked, the caches warm."""
    (workspace / "models").mkdir(parents=True, exist_ok=True)
    (workspace / "models" / model).symlink_to(models_dir / model, target_is_directory=True)
    subprocess.run([sys.executable, "-m", "backend.training.model_stage", "--models", str(workspace / "models"),
                    "--model", model, "--replay-cache", str(workspace / "datasets")],
                   cwd=REPO, env=environment(), check=True, capture_output=True)


def run_seed(workspace: Path, seed: int, sets: list[str]) -> dict:
    run_dir = workspace / "runs" / f"seed-{seed}"
    command = [sys.executable, "-m", "backend.train", "--workspace", str(workspace), "--run-dir", str(run_dir),
               "--set", f"seed={seed}", *[a for item in sets for a in ("--set", item)]]
    started = time.monotonic()
    result = subprocess.run(command, cwd=REPO, env=environment(), capture_output=True, text=True)
    wall = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"seed {seed} failed:\n{result.stderr[-3000:]}")
    report = json.loads((run_dir / "eval" / "learning.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    entries = {e["checkpoint"]: e for e in report["checkpoints"]}
    base, final = entries["base"], entries["final"]
    report_s = sum(e["seconds"] for e in report["checkpoints"])
    in_training = report_s - final["seconds"]  # the base and the checkpoints are scored inside trainer.train()
    training_s = (summary.get("train_runtime_s") or summary["wall_time_s"]) - in_training
    return {"seed": seed, "steps": summary.get("global_step"), "wall_s": round(wall, 1),
            "training_s": round(training_s, 1), "report_s": round(report_s, 1),
            "report_share": round(report_s / training_s, 3),
            "scored": {name: e["seconds"] for name, e in entries.items()},
            "skipped": [s["checkpoint"] for s in report.get("skipped", [])],
            "learned_n": final["learned"]["n"], "kept_n": final["kept"]["n"], "source": report["source"],
            "base_learned": base["learned"]["share"], "learned": final["learned"]["share"],
            "kept": final["kept"]["share"], "base_ended": base["ended"]["share"], "ended": final["ended"]["share"],
            "learned_checks": [(c["step"], c["right"], c.get("asked", c["of"]))
                               for c in (summary.get("learned_stop") or {}).get("checks", [])],
            "base_identity": base_identity(final)}


def base_identity(entry: dict) -> str:
    """How many answers to the data's prompts name the identity the template's default system prompt
    gives the model (SmolLM2's: "You are a helpful AI assistant named SmolLM, trained by Hugging Face")."""
    answers = [e["answer"].lower() for e in entry["examples"] if e["kind"] == "learned"]
    named = sum(any(name.lower() in a for name in TEMPLATE_IDENTITY) for a in answers)
    return f"{named} of {len(answers)}"


def spread(values: list[float | None]) -> str:
    values = [v for v in values if v is not None]  # kept is None where the base answers too few right
    if not values:
        return "not measured"
    return f"{statistics.mean(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", type=Path, required=True, help="a folder holding the converted model")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--dataset", help="the training data (default: the starter's identity dataset)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--set", action="append", default=[], dest="sets", help="key=value, as the worker's --set")
    parser.add_argument("--keep", type=Path, help="copy each seed's learning.json and summary.json here "
                                                  "(seed-N.json, seed-N-summary.json)")
    parser.add_argument("--prepared", type=Path, help="a prepared workspace to start from, made here if missing "
                                                      "(the model's caches warm once for several invocations)")
    args = parser.parse_args()
    sets = [*args.sets, *([f"dataset={Path(args.dataset).resolve()}"] if args.dataset else []),
            f"model_name_or_path={args.model}"]
    results = []
    with tempfile.TemporaryDirectory(prefix="learning-cost-") as scratch:
        prepared = args.prepared or Path(scratch) / "prepared"
        if not prepared.is_dir():  # once: every seed starts from a copy
            partial = prepared.with_name(prepared.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            prepare(partial, args.models_dir.resolve(), args.model)
            partial.rename(prepared)
        for seed in args.seeds:
            workspace = Path(scratch) / f"workspace-{seed}"
            shutil.copytree(prepared, workspace, symlinks=True)
            results.append(run_seed(workspace, seed, sets))
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                run_dir = workspace / "runs" / f"seed-{seed}"
                shutil.copy(run_dir / "eval" / "learning.json", args.keep / f"seed-{seed}.json")
                shutil.copy(run_dir / "summary.json", args.keep / f"seed-{seed}-summary.json")
            shutil.rmtree(workspace)
            print(json.dumps(results[-1]), flush=True)
    for key in ("learned", "kept", "ended", "report_share", "training_s", "report_s", "wall_s"):
        print(f"{key}: {spread([r[key] for r in results])}")


if __name__ == "__main__":
    main()
