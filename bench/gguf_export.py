"""GGUF export of a real run, each level checked in llama.cpp: the table in docs/EVALUATE_EXPORT.md.

    .venv/bin/python bench/gguf_export.py --train --models-dir DIR   # the starter recipe, then export
    .venv/bin/python bench/gguf_export.py --run WS/runs/RUN            # a run you already have

Trains (with --train) the starter recipe through the real worker in a fresh
workspace whose models/ is DIR (converted offline models are reused), then
runs `python -m backend.export --gguf ...` on the run's final adapter and
prints one Markdown row per level: size, greedy answers equal to the
adapter's, answers agreeing over their first 8 tokens, mean KL divergence
and top-1 agreement against the f16 file, and the wall time of each part.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LEVELS = ("q4_k_m", "q5_k_m", "q6_k", "q8_0", "f16")


def run(command: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    started = time.time()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: a GGUF check failed, which the table shows
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.time() - started


def train_starter(models_dir: Path, root: Path) -> tuple[Path, float]:
    workspace = root / "workspace"
    (workspace / "models").mkdir(parents=True)
    for folder in models_dir.iterdir():
        if folder.is_dir() and not folder.name.startswith("."):
            (workspace / "models" / folder.name).symlink_to(folder.resolve(), target_is_directory=True)
    run_dir = workspace / "runs" / "starter"
    seconds = run([sys.executable, "-m", "backend.train", "--recipe", "starter", "--workspace", str(workspace),
                   "--run-dir", str(run_dir)])
    return run_dir, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="a finished run folder")
    parser.add_argument("--train", action="store_true", help="train the starter recipe first")
    parser.add_argument("--models-dir", type=Path, help="converted offline models (with --train)")
    parser.add_argument("--levels", nargs="+", default=list(LEVELS))
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gguf-bench-"))
    train_s = None
    if args.train:
        args.run, train_s = train_starter(args.models_dir, root)
    out = root / "export"
    export_s = run([sys.executable, "-m", "backend.export", "--checkpoint", str(args.run / "final"), "--out", str(out),
                    "--gguf", *args.levels, "--no-zip"])
    report = json.loads((out / "export_report.json").read_text(encoding="utf-8"))
    gguf = report["gguf"]
    print(json.dumps({"train_s": train_s, "export_s": round(export_s, 1), "gguf_s": gguf["seconds"],
                      "passed": gguf["passed"], "template_family": gguf["template_family"]}))
    print("| level | MB | equal to adapter | agree over first 8 tokens | mean KL vs f16 | top-1 vs f16 |")
    print("|---|---:|---:|---:|---:|---:|")
    for level, info in gguf["files"].items():
        check = gguf["checks"]["levels"][level]
        kl = "" if check.get("mean_kl") is None else f"{check['mean_kl']:.4f}"
        top1 = "" if check.get("top1_agreement") is None else f"{check['top1_agreement']:.1%}"
        print(f"| {level} | {info['bytes'] / 1e6:.0f} | {check['equal']}/{check['total']} | "
              f"{check['agree_first_8']}/{check['total']} | {kl} | {top1} |")
    for row in gguf["checks"]["levels"]["f16"]["rows"]:
        print(json.dumps({k: row[k] for k in ("prompt", "agree_first", "reference", "gguf")}, ensure_ascii=False))


if __name__ == "__main__":
    main()
