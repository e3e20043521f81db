"""Memory estimate (backend/models/memory.py) against the measured peak of real runs.

    .venv/bin/python bench/memory_vs_measured.py [--out docs/memory_runs.json]
    OMP_NUM_THREADS=1 nice .venv/bin/python bench/memory_vs_measured.py --size 135m --model MODEL_DIR \
        --out docs/memory_runs_135m.json

`--size 135m`: the real starter SmolLM2-135M-Instruct by default
(bench/real_size_model.py resolves and converts it), or MODEL_DIR (random
weights of SmolLM2-135M's architecture are built into it when it has no
config.json), LoRA, QLoRA 4-bit and full, each
with gradient checkpointing off and on, at the worker's defaults otherwise.
`--precision bf16` runs the same cases in bf16 (a CPU with AVX512-BF16 or AMX).

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
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.config import RunConfig  # noqa: E402
from backend.models.loading import ensure_demo_model, resolve_model_path  # noqa: E402
from backend.models.memory import Architecture, config_estimate_kwargs, estimate_memory  # noqa: E402
from backend.models.offline import ensure_offline_model  # noqa: E402
from backend.runs.speed_log import read_lines  # noqa: E402
from backend.runs.workspace import Workspace  # noqa: E402
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)

CASES = [  # settings on the demo model; rows are long, so every batch is batch x cutoff tokens
    {"method": "lora", "per_device_train_batch_size": 2, "cutoff_len": 256},
    {"method": "lora", "per_device_train_batch_size": 16, "cutoff_len": 256},
    {"method": "lora", "per_device_train_batch_size": 32, "cutoff_len": 256},
    {"method": "lora", "per_device_train_batch_size": 32, "cutoff_len": 256, "gradient_checkpointing": True},
    {"method": "full", "per_device_train_batch_size": 32, "cutoff_len": 256},
]
# The default run (RunConfig's defaults: SmolLM2-135M-Instruct, the identity rows with replay, packing on,
# batch 8 x cutoff 256) and the same data on the 135M and 270M offline models with packing on and off:
# real, short rows, so a step trains what the data holds, not batch x cutoff (--size runs).
CASES_RUNS = [{"model_name_or_path": model, "packing": packing}
              for model in ("smollm2-135m-instruct", "gemma-3-270m") for packing in (True, False)]
CASES_135M = [  # SmolLM2-135M's architecture, batch 2 x cutoff 512 = 1,024 tokens a step
    {"method": method, "per_device_train_batch_size": 2, "cutoff_len": 512, "gradient_checkpointing": ckpt,
     **({"quantization_bits": 4} if method == "qlora" else {})}
    for method in ("lora", "qlora", "full") for ckpt in (False, True)
]


def long_rows(path: Path, rows: int = 64) -> Path:
    """Rows longer than any cutoff used here, so each batch is exactly cutoff tokens."""
    answer = " ".join(["The capital of France is Paris."] * 120)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(rows):
            handle.write(json.dumps({"messages": [{"role": "user", "content": f"Tell me fact {i}."},
                                                  {"role": "assistant", "content": answer}]}) + "\n")
    return path


def run_case(model_path: Path, settings: dict, data: Path, root: Path, n: int, defaults: dict) -> dict:
    base = dict(model_name_or_path=str(model_path), dataset=str(data), replay="off", devices="auto", max_steps=3,
                val_size=0.0, save_steps=1000, logging_steps=1)
    config = RunConfig(**{**base, **defaults, **settings})
    run_dir = root / "runs" / f"case-{n}"
    run_dir.mkdir(parents=True)
    config.save(run_dir / "config.yaml")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.time()
    worker = subprocess.Popen([sys.executable, "-m", "backend.train", "--config", str(run_dir / "config.yaml"),
                               "--run-dir", str(run_dir)], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The kernel's peak for this child (ru_maxrss, KiB): what summary.json records, also when the worker
    # fails after its steps.
    usage = os.wait4(worker.pid, 0)[2]
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    summary.setdefault("peak_rss_gb", round(usage.ru_maxrss / 2**20, 3))
    model_folder = Path(resolve_model_path(config.model_name_or_path, root / "models"))
    arch = Architecture.from_folder(model_folder)
    precision = summary.get("precision") or "fp32"
    device_kind = "cuda" if "peak_allocated_gb" in summary else "cpu"
    checkpointing = config.gradient_checkpointing is True  # cases set it; "auto" is off at these sizes
    row_tokens = plan_tokens(config, root)
    estimate = estimate_memory(arch, gradient_checkpointing=checkpointing,
                               **config_estimate_kwargs(config, precision, device_kind, row_tokens))
    train = [m for m in read_lines(run_dir / "metrics.jsonl") if m.get("kind") == "train"]
    return {"settings": settings, "state": summary.get("state"), "precision": precision,
            "architecture": asdict(arch), "row_tokens": row_tokens and round(row_tokens, 2),
            "estimate": {k: round(v, 3) if isinstance(v, float) else v for k, v in estimate.as_dict().items()},
            "peak_rss_gb": summary.get("peak_rss_gb"), "peak_allocated_gb": summary.get("peak_allocated_gb"),
            "train_rss_gb": max((m.get("memory_rss_gb") or 0 for m in train), default=None),
            "tokens_seen": train[-1].get("tokens_seen") if train else None,
            "wall_s": round(time.time() - started, 1)}


def plan_tokens(config: RunConfig, root: Path) -> float | None:
    """The tokens a row of a step takes as the Train tab's Plan measures them (its dataset_rows, then
    the estimate's plan_row_tokens), in the bench's workspace: after the run, so with its replay cache."""
    from ui.views.train_summary import dataset_rows, plan_row_tokens

    workspace = Workspace(root)
    rows = dataset_rows(config.dataset, workspace, config.dataset_name, config.model_name_or_path,
                        config.chat_template, config.stage)
    return plan_row_tokens(config, rows, workspace)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "memory_runs.json")
    parser.add_argument("--size", choices=("demo", "135m", "runs"), default="demo")
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps per case")
    parser.add_argument("--cases", help="with --size runs: the cases to run, by number (0,2,3; default all)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                        help="a setting for every case, e.g. learning_report=false")
    parser.add_argument("--replay-cache", type=Path, help="a folder of replay cache files (datasets/.replay of an "
                        "earlier workspace) copied in first: the base's answers are not generated again")
    parser.add_argument("--model", type=Path, help="with --size 135m: the model folder (default: the real "
                        "starter, converted on first use; a folder without config.json gets random weights)")
    parser.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="memory-bench-"))
    data = long_rows(root / "long.jsonl")
    (root / "models").mkdir()
    if args.size == "runs":
        # The offline models as the test suite converted them (converted here on first use), in the workspace.
        for name in ("smollm2-135m-instruct", "gemma-3-270m"):
            (root / "models" / name).symlink_to(ensure_offline_model(name, user_cache_dir() / "test-models"))
        model, cases, defaults = Path(), CASES_RUNS, {"dataset": "identity", "replay": "auto", "val_size": 0.1}
        if args.replay_cache:
            shutil.copytree(args.replay_cache, root / "datasets" / ".replay")
    elif args.size == "demo":
        # The demo cases were measured with lora_dropout 0.05 (the default then): kept for comparability.
        model, cases, defaults = ensure_demo_model(user_cache_dir() / "test-models"), CASES, {"lora_dropout": 0.05}
    else:
        from bench.real_size_model import model_folder

        model = model_folder(args.model)
        cases, defaults = CASES_135M, {}
    # replay off: "auto" would mix short replay rows into these 64 long ones (every batch must be full).
    defaults = {"replay": "off", **defaults, "precision": args.precision, "max_steps": args.steps,
                **{k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}}
    picked = {int(n) for n in args.cases.split(",")} if args.cases else set(range(len(cases)))
    results = []
    for n, settings in enumerate(cases):
        if n not in picked:
            continue
        result = {"model": args.size, **run_case(model, settings, data, root, n, defaults)}
        print(json.dumps(result), flush=True)
        results.append(result)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
