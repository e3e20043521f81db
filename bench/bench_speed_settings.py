"""Each speed setting of the worker measured on and off, and the worker on the
plain script's own settings against the plain script (the worker's overhead).

Demo model, LoRA r 16 all-linear, batch 8, cutoff 512, the shared alpaca rows,
one process per run, variants alternating (order reversed every repetition):

  defaults        the worker as shipped (packing, chunked loss, fused AdamW,
                  lora_dropout 0, gradient checkpointing auto)
  packing off     padded, length-grouped batches
  optim adamw     the plain (unfused) AdamW loop
  dropout 0.05    lora_dropout 0.05
  torch_compile   torch.compile on
  as plain        the plain script's settings: random batches padded to the
                  longest row, no packing, lora_dropout 0.05, adamw_torch
  plain           bench/bench_train_throughput.py's tutorial Trainer script

tokens/s: non-padding tokens between the end of step 1 and the end of the
last step over that wall time (model loading and compiling excluded).

    nice .venv/bin/python bench/bench_speed_settings.py --reps 2 --steps 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)
from bench.bench_train_throughput import DATA, _env, run_plain  # noqa: E402

VARIANTS = {
    "defaults": {},
    "packing off": {"packing": False},
    "optim adamw": {"optim": "adamw_torch"},
    "dropout 0.05": {"lora_dropout": 0.05},
    "torch_compile": {"torch_compile": True},
    "as plain": {"packing": False, "group_by_length": False, "lora_dropout": 0.05, "optim": "adamw_torch"},
}


def run_variant(workspace: Path, overrides: dict, steps: int) -> dict:
    from backend.config_recipes import tiny_config

    run_dir = workspace / "runs" / f"v-{time.time_ns()}"
    config_file = workspace / "variant.yaml"
    tiny_config(dataset=str(DATA), max_steps=steps, per_device_train_batch_size=8, cutoff_len=512, val_size=0,
              learning_rate=2e-4, logging_steps=steps - 1, save_steps=100_000, save_total_limit=1,
              **overrides).save(config_file)
    subprocess.run([sys.executable, "-m", "backend.train", "--config", str(config_file), "--run-dir", str(run_dir),
                    "--workspace", str(workspace)], cwd=REPO, env=_env(), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    train = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in train if r["kind"] == "train"]
    first, last = train[0], train[-1]
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"tokens_per_second": (last["tokens_seen"] - first["tokens_seen"]) / (last["time"] - first["time"]),
            "peak_rss_gb": summary["peak_rss_gb"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--models", type=Path, default=user_cache_dir() / "test-models")
    parser.add_argument("--only", nargs="*", help="variant names (plus 'plain')")
    args = parser.parse_args()
    from backend.models.loading import ensure_demo_model

    workspace = Path(tempfile.mkdtemp(prefix="bench-settings-"))
    (workspace / "models").mkdir(parents=True)
    (workspace / "models" / "demo").symlink_to(ensure_demo_model(args.models), target_is_directory=True)
    names = args.only or [*VARIANTS, "plain"]
    results = {name: [] for name in names}
    for rep in range(args.reps):
        for name in (names if rep % 2 == 0 else names[::-1]):
            try:
                if name == "plain":
                    result = run_plain(workspace, args.steps, 8, 512)
                else:
                    result = run_variant(workspace, VARIANTS[name], args.steps)
            except subprocess.CalledProcessError as error:
                print(json.dumps({"variant": name, "rep": rep, "error": str(error)}), flush=True)
                continue
            results[name].append(result)
            print(json.dumps({"variant": name, "rep": rep, **result}), flush=True)
    base = statistics.median(r["tokens_per_second"] for r in results[names[0]])
    print(f"\n{args.reps} repetitions x {args.steps} steps, demo model, batch 8, cutoff 512, LoRA r16")
    print(f"| variant | tokens/s (median) | vs {names[0]} | peak RSS GiB | runs |")
    print("|---|---|---|---|---|")
    for name, runs in results.items():
        if not runs:
            continue
        speed = statistics.median(r["tokens_per_second"] for r in runs)
        memory = statistics.median(r["peak_rss_gb"] for r in runs)
        each = ", ".join(f"{r['tokens_per_second']:.0f}" for r in runs)
        print(f"| {name} | {speed:.0f} | {speed / base:.2f}x | {memory:.2f} | {each} |")


if __name__ == "__main__":
    main()
