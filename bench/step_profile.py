"""Where one LoRA training step's time goes at the 135M size, and the fastest
any trainer could be with this CPU's kernels.

Two computations of the same 24 alpaca rows (three batches of 8), in one
process, alternating, on the real starter SmolLM2-135M-Instruct by default
(bench/real_size_model.py; --model PATH for another folder) with LoRA r 16
all-linear; rows rendered through the model's own chat template:

  worker      the worker's step: rows packed without padding, attention within
              each row (backend/training/packing.py), the head and the loss only
              on labelled positions, in chunks (backend/training/loss.py)
  lf-packing  LLaMA-Factory's `packing: true`: the rows joined and cut into
              512-token sequences, one causal attention per sequence (rows see
              each other), the model's own full-vocabulary logits and loss

For each: FLOPs per non-padding token (torch's FlopCounterMode: matmuls and
attention), seconds per token, and the split of the profiled time into
matmuls, attention and everything else (norms, rotary, activations, casts,
the loss's softmax). "matmul + attention bound" is the tokens/s the step
would reach if everything else took no time: no implementation of that
computation on these kernels can go faster.

    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python bench/step_profile.py --precision fp32
    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python bench/step_profile.py --precision bf16
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "alpaca_en_demo.json"
sys.path.insert(0, str(REPO))
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear")


def encoded_rows(tokenizer, count: int, cutoff: int) -> list[dict]:
    """The first `count` rows, read and encoded the way the worker does it."""
    from backend.data.encode import encode_messages
    from backend.data.resolve import load_rows

    rows, _ = load_rows(DATA)
    encoded = [encode_messages(tokenizer, row["messages"], cutoff) for row in rows[:count]]
    return [{"input_ids": row.input_ids, "labels": row.labels} for row in encoded]


def worker_batches(rows: list[dict], batch: int) -> list[dict]:
    from backend.training.packing import PackedCollator

    return [PackedCollator()(rows[i:i + batch]) for i in range(0, len(rows), batch)]


def lf_packed_batches(rows: list[dict], cutoff: int, per_step: int) -> list[dict]:
    """LLaMA-Factory's packing: every row's tokens joined, cut into cutoff-long sequences, `per_step` a batch."""
    ids = [t for r in rows for t in r["input_ids"]]
    labels = [t for r in rows for t in r["labels"]]
    sequences = [(ids[i:i + cutoff], labels[i:i + cutoff]) for i in range(0, len(ids) - cutoff + 1, cutoff)]
    return [{"input_ids": torch.tensor([s[0] for s in sequences[i:i + per_step]]),
             "labels": torch.tensor([s[1] for s in sequences[i:i + per_step]])}
            for i in range(0, len(sequences), per_step)]


def build(model_path: Path, precision: str, packed_attention: bool):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from backend.training.packing import use_packed_sdpa

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32  # LoRA loads the frozen base in the compute dtype
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    model.config.use_cache = False
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear"))
    if packed_attention:
        use_packed_sdpa(model)
    return model


def step_function(model, name: str, precision: str):
    from backend.training.loss import causal_lm_loss, deferred_head, output_head

    head = output_head(model)

    def step(batch: dict) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            if name == "worker":
                with deferred_head(head):
                    hidden = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits
                loss = causal_lm_loss(hidden, head, batch["labels"])
            else:
                loss = model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
        loss.backward()
        model.zero_grad(set_to_none=True)

    return step


def tokens(batches: list[dict]) -> int:
    return sum(int(b["input_ids"].numel()) for b in batches)  # neither has padding


def measure(step, batches: list[dict]) -> dict:
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step(batches[0])
    flops_per_token = counter.get_total_flops() / tokens(batches[:1])
    started = time.perf_counter()
    for batch in batches:
        step(batch)
    seconds = time.perf_counter() - started
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in batches:
            step(batch)
    split = {"matmul": 0.0, "attention": 0.0, "other": 0.0}
    for event in prof.key_averages():
        group = ("matmul" if event.key in MATMUL_OPS else
                 "attention" if "scaled_dot_product" in event.key else "other")
        split[group] += event.self_cpu_time_total
    total = sum(split.values())
    return {"tokens_per_second": tokens(batches) / seconds, "flops_per_token": flops_per_token,
            "share": {k: v / total for k, v in split.items()}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--model", type=Path, help="a model folder (default: the real starter, converted on first use)")
    parser.add_argument("--rows", type=int, default=24)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from bench.real_size_model import describe, model_folder

    torch.manual_seed(0)
    model_path = model_folder(args.model)
    rows = encoded_rows(AutoTokenizer.from_pretrained(model_path), args.rows, 512)
    plans = {"worker": (worker_batches(rows, 8), True), "lf-packing": (lf_packed_batches(rows, 512, 3), False)}
    results: dict[str, list[dict]] = {name: [] for name in plans}
    for rep in range(args.reps):
        for name in (list(plans) if rep % 2 == 0 else list(plans)[::-1]):
            batches, packed_attention = plans[name]
            model = build(model_path, args.precision, packed_attention)
            step = step_function(model, name, args.precision)
            step(batches[0])  # warm-up: first-call allocations and kernel choices
            results[name].append(measure(step, batches))
            print(json.dumps({"script": name, "rep": rep, **results[name][-1]}), flush=True)
            del model, step
    report(results, args.precision, describe(model_path))


def report(results: dict, precision: str, model: str) -> None:
    print(f"\nOne LoRA step, {model}, {precision}, {torch.get_num_threads()} thread(s); medians")
    print("| computation | tokens/s | GFLOP per token | matmul | attention | other | matmul + attention bound (tokens/s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, runs in results.items():
        speed = statistics.median(r["tokens_per_second"] for r in runs)
        share = {k: statistics.median(r["share"][k] for r in runs) for k in ("matmul", "attention", "other")}
        bound = speed / (share["matmul"] + share["attention"])
        print(f"| {name} | {speed:.1f} | {statistics.median(r['flops_per_token'] for r in runs) / 1e9:.2f} | "
              f"{share['matmul']:.0%} | {share['attention']:.0%} | {share['other']:.0%} | {bound:.1f} |")


if __name__ == "__main__":
    main()
