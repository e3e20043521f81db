"""The time estimate against the time runs took, on this machine.

For each case (a model, a method, a batch, steps): the FLOPs estimate (c) before anything is
measured, then a speed probe (python -m backend.training.speed_probe), then run 1 (estimated from
the probe: source b) and run 2 with other steps and another learning rate (estimated from run 1:
source a), each a real `python -m backend.train` in a fresh workspace. A run's estimate is what
its worker wrote into status.json as it started; summary.json holds it beside the actual training
seconds (wall_time_s). Cases: the 2M demo model (LoRA at two ranks and batches, full) and
SmolLM2-135M's architecture with random weights and the starter's tokenizer (LoRA; LoRA with
gradient checkpointing).

    nice .venv/bin/python bench/bench_time_estimate.py [--out .cache/bench-estimate] [--only NAME ...]

Prints a markdown table (docs/BENCHMARKS.md, "Time estimate") and writes results.jsonl in --out.
The machine's 1-minute load average is recorded with each run: on a shared machine it moves the
speed between the estimate's measurement and the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)
from bench.real_size_model import build as build_real_size  # noqa: E402

DEMO = {"model_name_or_path": "demo", "dataset": "demo"}
CASES = {
    # name: (settings, steps of run 1, steps of run 2)
    "demo-lora-r16-b8": ({**DEMO, "lora_r": 16, "per_device_train_batch_size": 8, "save_steps": 10}, 20, 30),
    "demo-lora-r4-b4": ({**DEMO, "lora_r": 4, "per_device_train_batch_size": 4, "save_steps": 8}, 20, 30),
    "demo-full-b8": ({**DEMO, "method": "full", "per_device_train_batch_size": 8, "save_steps": 8}, 16, 24),
    "135m-lora-r8-b4": ({"model_name_or_path": "REAL", "dataset": "demo", "lora_r": 8,
                         "per_device_train_batch_size": 4, "cutoff_len": 256, "save_steps": 4}, 6, 9),
    "135m-lora-r16-b4-ckpt": ({"model_name_or_path": "REAL", "dataset": "demo", "lora_r": 16,
                               "per_device_train_batch_size": 4, "cutoff_len": 256, "save_steps": 4,
                               "gradient_checkpointing": True}, 5, 8),
}


def env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")


def write_config(folder: Path, settings: dict, steps: int, lr: float, name: str) -> Path:
    from backend.config_recipes import recipe_config

    config = recipe_config("demo-tiny").with_overrides([f"{k}={json.dumps(v)}" for k, v in settings.items()])
    config = config.with_overrides([f"max_steps={steps}", f"learning_rate={lr}", f"run_name={name}"])
    path = folder / f"{name}.yaml"
    config.save(path)
    return path


def run_worker(config: Path, workspace: Path) -> Path:
    before = set((workspace / "runs").glob("*"))
    subprocess.run([sys.executable, "-m", "backend.train", "--config", str(config), "--workspace", str(workspace)],
                   cwd=REPO, env=env(), check=True, capture_output=True)
    (run_dir,) = set((workspace / "runs").glob("*")) - before
    return run_dir


def flops_estimate(config_path: Path, workspace: Path) -> dict:
    from backend.config import RunConfig
    from backend.models.hardware import training_devices
    from backend.runs.workspace import Workspace
    from backend.training.estimate import estimate_run_seconds

    return estimate_run_seconds(RunConfig.load(config_path), Workspace(workspace), None,
                                training_devices("auto")).to_dict()


def row(case: str, run: str, estimate: dict, actual: float) -> dict:
    return {"case": case, "run": run, "source": estimate["source"], "estimate_s": round(estimate["seconds_mid"], 2),
            "low_s": round(estimate["seconds_low"], 2), "high_s": round(estimate["seconds_high"], 2),
            "actual_s": actual, "error": round(estimate["seconds_mid"] / actual - 1, 3),
            "in_range": estimate["seconds_low"] <= actual <= estimate["seconds_high"],
            "load": round(os.getloadavg()[0], 2)}


def bench_case(name: str, settings: dict, steps: tuple[int, int], out: Path, real: Path) -> list[dict]:
    from backend.storage.atomic_files import read_json

    workspace = out / name / "workspace"
    shutil.rmtree(out / name, ignore_errors=True)
    (workspace / "runs").mkdir(parents=True)
    (workspace / "models").mkdir()
    from backend.models.loading import ensure_demo_model

    (workspace / "models" / "demo").symlink_to(ensure_demo_model(user_cache_dir() / "test-models"))
    settings = {k: (str(real) if v == "REAL" else v) for k, v in settings.items()}
    first = write_config(out / name, settings, steps[0], 1e-3, "run1")
    second = write_config(out / name, settings, steps[1], 3e-3, "run2")
    rows = []
    flops = flops_estimate(first, workspace)
    subprocess.run([sys.executable, "-m", "backend.training.speed_probe", "--config", str(first),
                    "--workspace", str(workspace)], cwd=REPO, env=env(), check=True, capture_output=True)
    for run, config in (("run1", first), ("run2", second)):
        summary = read_json(run_worker(config, workspace) / "summary.json", {})
        rows.append(row(name, run, summary["estimate"], summary["wall_time_s"]))
        if run == "run1":
            rows.append(row(name, "run1", flops, summary["wall_time_s"]))
    return rows


def drift_rows(out: Path, rows: list[dict]) -> list[dict]:
    """For each run estimated from a measurement (probe, or the run before it): how much faster or slower a
    step ran than in that measurement (the machine's load moving), and the error the estimate would have
    had at the run's own step time: what is left is the profile's own error (set-up, evaluations, end)."""
    from backend.config import RunConfig
    from backend.runs.speed_log import profile_seconds, read_lines

    out_rows = []
    for r in rows:
        if r["source"] == "flops":
            continue
        records = read_lines(out / r["case"] / "workspace" / "speed" / "speed_log.jsonl")
        runs = [x for x in records if x["source"] == "run"]
        if len(runs) < (1 if r["run"] == "run1" else 2):
            continue
        source = next(x for x in records if x["source"] == "probe") if r["run"] == "run1" else runs[0]
        own = runs[0] if r["run"] == "run1" else runs[1]
        if not (source.get("profile") and own.get("profile")):
            continue
        config = RunConfig.load(out / r["case"] / f"{r['run']}.yaml")
        same_speed = {**source["profile"], "step": own["profile"]["step"]}
        at_own_speed = profile_seconds(same_speed, config, own["steps"], config.val_size > 0)
        out_rows.append({**r, "step_drift": round(own["profile"]["step"] / source["profile"]["step"], 3),
                         "error_at_own_step": round(at_own_speed / r["actual_s"] - 1, 3),
                         "load_then": source.get("load"), "load_run": own.get("load")})
    return out_rows


def report(out: Path) -> None:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    print("| case | run | source | estimate (range) s | actual s | error | in range | load |")
    print("|---|---|---|---|---:|---:|---|---:|")
    for r in rows:
        print(f"| {r['case']} | {r['run']} | {r['source']} | {r['estimate_s']} ({r['low_s']}-{r['high_s']}) | "
              f"{r['actual_s']} | {r['error']:+.0%} | {'yes' if r['in_range'] else 'no'} | {r['load']} |")
    for source in ("runs", "probe", "flops"):
        errors = [abs(r["error"]) for r in rows if r["source"] == source]
        if errors:
            print(f"\n{source}: median |error| {statistics.median(errors):.0%}, max {max(errors):.0%}, "
                  f"{sum(e <= 0.25 for e in errors)}/{len(errors)} within ±25%")
    drifts = drift_rows(out, rows)
    print("\n| case | run | source | step time vs its measurement | error | error at the run's own step time | "
          "load then / in the run |")
    print("|---|---|---|---:|---:|---:|---|")
    for d in drifts:
        print(f"| {d['case']} | {d['run']} | {d['source']} | {d['step_drift']:.2f}x | {d['error']:+.0%} | "
              f"{d['error_at_own_step']:+.0%} | {d['load_then']} / {d['load_run']} |")
    if drifts:
        left = [abs(d["error_at_own_step"]) for d in drifts]
        print(f"\nat the run's own step time: median |error| {statistics.median(left):.0%}, max {max(left):.0%}, "
              f"{sum(e <= 0.25 for e in left)}/{len(left)} within ±25%")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=REPO / ".cache" / "bench-estimate")
    parser.add_argument("--only", nargs="*", choices=list(CASES))
    parser.add_argument("--report", action="store_true", help="only print the tables of an earlier run's --out")
    args = parser.parse_args()
    if args.report:
        report(args.out)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    real = build_real_size(REPO / ".cache" / "smollm2-135m-random", tokenizer_from=user_cache_dir() / "test-models"
                           / "smollm2-135m-instruct")
    started, rows = time.time(), []
    with open(args.out / "results.jsonl", "w", encoding="utf-8") as results:
        for name in args.only or CASES:
            settings, *steps = CASES[name]
            for record in bench_case(name, settings, tuple(steps), args.out, real):
                results.write(json.dumps(record) + "\n")
                results.flush()
                rows.append(record)
                print(json.dumps(record), file=sys.stderr, flush=True)
    report(args.out)
    print(f"\nbench wall time {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
