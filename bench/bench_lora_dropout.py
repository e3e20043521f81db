"""What `lora_dropout > 0` costs at the 135M size: one LoRA training step
(forward + backward, r 16 all-linear) on the same real rows with dropout 0.05
and with 0, alternating in one process, medians of --reps.

With dropout peft computes `lora_B(lora_A(dropout(x)))` on a dropped *copy* of
each adapted layer's input (kept for the backward pass); with 0 it skips the
copy. The rows are the first `--rows` of ../shared/data/alpaca_en_demo.json,
tokenised by the worker's encoder and packed without padding.

    OMP_NUM_THREADS=2 nice .venv/bin/python bench/bench_lora_dropout.py [--reps 3] [--rows 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO.parent / "shared" / "data" / "alpaca_en_demo.json"


def batch(tokenizer, rows: int, cutoff: int):
    from backend.data.encode import encode_messages
    from backend.data.resolve import load_rows
    from backend.training.packing import PackedCollator

    loaded, _ = load_rows(DATA)
    encoded = []
    for row in loaded[:rows]:
        enc = encode_messages(tokenizer, row["messages"], cutoff)
        encoded.append({"input_ids": enc.input_ids, "labels": enc.labels})
    return PackedCollator()(encoded)


def step_seconds(model, inputs) -> float:
    start = time.perf_counter()
    model(**inputs).loss.backward()
    seconds = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--cutoff", type=int, default=512)
    parser.add_argument("--model", type=Path, default=REPO / ".cache" / "smollm2-135m-arch")
    args = parser.parse_args()
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from backend.models.loading import load_tokenizer
    from bench.real_size_model import build

    folder = build(args.model)
    tokenizer = load_tokenizer(folder)
    inputs = batch(tokenizer, args.rows, args.cutoff)
    models = {}
    for dropout in (0.0, 0.05):
        torch.manual_seed(0)
        base = AutoModelForCausalLM.from_pretrained(folder)
        base.config.use_cache = False
        models[dropout] = get_peft_model(base, LoraConfig(task_type="CAUSAL_LM", r=16, lora_alpha=32,
                                                          lora_dropout=dropout, target_modules="all-linear"))
        models[dropout].train()
        step_seconds(models[dropout], inputs)  # warm-up
    times = {0.0: [], 0.05: []}
    for rep in range(args.reps):
        for dropout in ((0.0, 0.05) if rep % 2 == 0 else (0.05, 0.0)):
            times[dropout].append(step_seconds(models[dropout], inputs))
            print(f"dropout {dropout}: {times[dropout][-1]:.2f} s", flush=True)
    tokens = int(inputs["input_ids"].numel())
    med = {d: statistics.median(t) for d, t in times.items()}
    print(f"\n{args.reps} alternating steps each, {args.rows} rows packed ({tokens} tokens), "
          f"threads {torch.get_num_threads()}")
    print("| lora_dropout | step s (median) | tokens/s | runs (s) |")
    print("|---|---|---|---|")
    for dropout, values in times.items():
        each = ", ".join(f"{v:.2f}" for v in values)
        print(f"| {dropout} | {med[dropout]:.2f} | {tokens / med[dropout]:.0f} | {each} |")
    print(f"\n0.05 / 0 step time: {med[0.05] / med[0.0]:.2f}x")


if __name__ == "__main__":
    main()
