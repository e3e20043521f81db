"""DPO step time and margin on the demo: which settings to make the dpo stage's defaults.

Runs the real worker (`python -m backend.train --set stage=dpo ...`) on the
demo pairs (`dataset: demo-pairs`, no eval) over an SFT run's adapter, for
each variant in turn, `--rounds` times alternating, and prints per variant the
median seconds per optimizer step (from metrics.jsonl timestamps, first step
left out) and the reward margin / accuracy after each quarter of the steps.

    python bench/bench_pref_dpo.py --workspace WS --sft WS/runs/SFT_RUN [--steps 16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {
    # The SFT demo's settings (the first DPO measurement: docs/LIBRARY_TRAPS.md, training).
    "sft-like: batch 8, cutoff 256, lr 3e-3": ["per_device_train_batch_size=8", "cutoff_len=256", "learning_rate=3e-3"],
    # The dpo stage defaults (backend/config.py STAGE_DEFAULTS).
    "defaults: batch 4, cutoff 64, lr 5e-4": [],
    "defaults + precompute_ref_log_probs": ["precompute_ref_log_probs=true"],
}


def run(workspace: Path, sft: Path, sets: list[str], steps: int) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix="bench-dpo-", dir=workspace / "runs"))
    command = [sys.executable, "-m", "backend.train", "--workspace", str(workspace), "--run-dir", str(run_dir),
               "--set", "stage=dpo", "--set", "dataset=demo-pairs", "--set", f"init_adapter={sft}",
               "--set", "val_size=0", "--set", f"max_steps={steps}", "--set", "logging_steps=1",
               "--set", f"save_steps={steps}"]
    for item in sets:
        command += ["--set", item]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    subprocess.run(command, cwd=REPO, env=env, check=True, capture_output=True)
    train = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in train if r["kind"] == "train"]
    gaps = [b["time"] - a["time"] for a, b in zip(train[1:], train[2:])]
    quarters = [train[max(0, len(train) * q // 4 - 1)] for q in (1, 2, 3, 4)]
    return {"s_per_step": statistics.median(gaps),
            "margins": [round(r["rewards/margins"], 2) for r in quarters],
            "accuracy": [round(r["rewards/accuracies"], 2) for r in quarters]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--sft", type=Path, required=True, help="an SFT run folder (its final/ is continued)")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    for _ in range(args.rounds):  # alternating: load on the shared machine hits every variant alike
        for name, sets in VARIANTS.items():
            results[name].append(run(args.workspace, args.sft / "final", sets, args.steps))
    base = statistics.median(r["s_per_step"] for r in results[next(iter(VARIANTS))])
    print(f"| variant | s / step (median of {args.rounds}) | ratio | margin after 1/4..4/4 | accuracy |")
    print("|---|---:|---:|---|---|")
    for name, rows in results.items():
        step = statistics.median(r["s_per_step"] for r in rows)
        print(f"| {name} | {step:.2f} | {step / base:.2f} | {rows[-1]['margins']} | {rows[-1]['accuracy']} |")


if __name__ == "__main__":
    main()
