"""Gradient checkpointing's memory on the CPU, with it and without, at two model sizes.

    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python bench/checkpointing_memory.py \
        [--model-135m /work/models-cache/smollm2-135m-instruct] [--out /tmp/ckpt_memory.json]

LoRA at the worker's defaults (packing, chunked loss, lora_dropout 0), fp32, 3
optimizer steps per case, rows longer than the cutoff so every batch is batch x
cutoff tokens: the tiny demo model (2 layers) at the demo-tiny recipe's batch
8 x 256 and at 32 x 256, and SmolLM2-135M (30 layers) at 2 x 512 and 4 x 512.
Each case is the real worker (`python -m backend.train`); the peak is its
`peak_rss_gb` (ru_maxrss) from summary.json, printed beside the estimate of
backend/models/memory.py.

Why it exists: the CPU factor for checkpointing was once one number fitted at
135M (4.5x the live activations), which on the 2-layer demo said checkpointing
*raised* memory (0.83 against 0.71 GiB at 8 x 256; 1.77 at 32 x 256, 59% over the
measured peak). Checkpointing frees each layer's activations after the
forward and recomputes them in backward; on the CPU glibc keeps part of those
freed blocks resident, so what stays grows with the number of layers
recomputed, not with the live tensors (`CHECKPOINT_HEAP_SHARE` in
backend/models/memory.py, fitted on the 135M rows below; the demo rows are its
out-of-sample check).

Measured 2026-12-01 on this machine (2 cores, shared, load 2-13; memory is not
timing-sensitive), peak RSS GiB (raw results: docs/memory_runs_checkpointing.json):

| model | batch x cutoff | checkpointing off | on |
|---|---|---:|---:|
| demo (2 layers)          | 8 x 256  | 0.740 | 0.738 |
| demo (2 layers)          | 32 x 256 | 1.329 | 1.115 |
| SmolLM2-135M (30 layers) | 2 x 512  | 3.502 | 2.093 |
| SmolLM2-135M (30 layers) | 4 x 512  | 5.722 | 3.110 |
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.models.loading import ensure_demo_model  # noqa: E402
from backend.models.memory import Architecture  # noqa: E402
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)
from bench.memory_vs_measured import long_rows, run_case  # noqa: E402

SIZES = {  # model -> batch x cutoff pairs
    "demo": ((8, 256), (32, 256)),
    "135m": ((2, 512), (4, 512)),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-135m", type=Path, help="SmolLM2-135M folder (default: bench/real_size_model.py's)")
    parser.add_argument("--only", choices=tuple(SIZES), help="one model size")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ckpt-memory-"))
    data = long_rows(root / "long.jsonl")
    results, n = [], 0
    for size, shapes in SIZES.items():
        if args.only and size != args.only:
            continue
        if size == "demo":
            model = ensure_demo_model(user_cache_dir() / "test-models")
        else:
            from bench.real_size_model import model_folder

            model = model_folder(args.model_135m)
        for batch, cutoff in shapes:
            for checkpointing in (False, True):
                settings = {"method": "lora", "per_device_train_batch_size": batch, "cutoff_len": cutoff,
                            "gradient_checkpointing": checkpointing}
                result = {"model": size, "architecture": asdict(Architecture.from_folder(model)),
                          **run_case(model, settings, data, root, n, {})}
                n += 1
                print(f"{size} {batch}x{cutoff} checkpointing {'on ' if checkpointing else 'off'}: "
                      f"measured {result['peak_rss_gb']} GiB, estimate {result['estimate']['total_gb']:.2f} GiB "
                      f"({result['state']}, {result['wall_s']} s)", flush=True)
                results.append(result)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
