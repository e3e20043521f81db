"""Memory estimate (backend/models/memory.py) against the measured peak of real runs.

    .venv/bin/python bench/memory_vs_measured.py [--out docs/memory_runs.json]

Runs the real worker (`python -m backend.train`) a few steps for each case on
this machine and reads `peak_rss_gb` (and, on a GPU, `peak_allocated_gb`)
from each run's summary.json. Rows are long enough that every batch is padded
to the full cutoff, which is what the estimate assumes (the worst case).

The demo model's weights are tiny, so on the CPU the batch-dependent terms
(activations, logits) are what moves; the differences between cases isolate
them from the fixed cost of the Python process (docs/MEMORY.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from backend.config import RunConfig  # noqa: E402
from backend.models.loading import ensure_demo_model  # noqa: E402
from backend.models.memory import Architecture, estimate_memory  # noqa: E402

CASES = [  # settings on the demo model; rows are long, so every batch is batch x cutoff tokens
    {"method": "lora", "per_device_train_batch_size": 2, "cutoff_len": 256},
    {"method": "lora", "per_device_train_batch_size": 16, "cutoff_len": 256},
    {"method": "lora", "per_device_train_batch_size": 32, "cutoff_len": 256},
    {"method": "lora", "per_device_train_batch_size": 32, "cutoff_len": 256, "gradient_checkpointing": True},
    {"method": "full", "per_device_train_batch_size": 32, "cutoff_len": 256},
]


def long_rows(path: Path, rows: int = 64) -> Path:
    """Rows longer than any cutoff used here, so each batch is exactly cutoff tokens."""
    answer = " ".join(["The capital of France is Paris."] * 120)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(rows):
            handle.write(json.dumps({"messages": [{"role": "user", "content": f"Tell me fact {i}."},
                                                  {"role": "assistant", "content": answer}]}) + "\n")
    return path


def run_case(model_path: Path, settings: dict, data: Path, root: Path, n: int) -> dict:
    config = RunConfig(model_name_or_path=str(model_path), dataset=str(data), devices="auto", max_steps=3,
                       val_size=0.0, save_steps=1000, logging_steps=1, lora_dropout=0.05, **settings)
    run_dir = root / "runs" / f"case-{n}"
    run_dir.mkdir(parents=True)
    config.save(run_dir / "config.yaml")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.time()
    subprocess.run([sys.executable, "-m", "backend.train", "--config", str(run_dir / "config.yaml"),
                    "--run-dir", str(run_dir)], cwd=REPO, env=env, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    arch = Architecture.from_folder(model_path)
    precision = summary.get("precision") or "fp32"
    device_kind = "cuda" if "peak_allocated_gb" in summary else "cpu"
    estimate = estimate_memory(arch, method=config.method, precision=precision,
                               batch_size=config.per_device_train_batch_size, cutoff_len=config.cutoff_len,
                               gradient_checkpointing=config.gradient_checkpointing,
                               quantization_bits=config.quantization_bits, lora_r=config.lora_r,
                               lora_target=config.lora_target, lora_dropout=config.lora_dropout,
                               optim=config.optim, device_kind=device_kind)
    return {"settings": settings, "state": summary.get("state"), "precision": precision,
            "estimate": {k: round(v, 3) if isinstance(v, float) else v for k, v in estimate.as_dict().items()},
            "peak_rss_gb": summary.get("peak_rss_gb"), "peak_allocated_gb": summary.get("peak_allocated_gb"),
            "wall_s": round(time.time() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "memory_runs.json")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="memory-bench-"))
    demo = ensure_demo_model(REPO / ".cache" / "test-models")
    data = long_rows(root / "long.jsonl")
    results = []
    for n, settings in enumerate(CASES):
        result = {"model": "demo", **run_case(demo, settings, data, root, n)}
        print(json.dumps(result), flush=True)
        results.append(result)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
