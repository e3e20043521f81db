"""sdpa's flash kernel on the CPU, fp32 against bf16, forward + backward of one causal row by length.

Why short rows of a bf16 run attend in fp32 (backend/training/packing.py, FP32_ATTENTION_BELOW):
SmolLM2-135M's attention shape (9 query heads of 64), one thread, median of `--reps` calls.

    OMP_NUM_THREADS=1 nice .venv/bin/python bench/bench_cpu_attention_dtype.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def milliseconds(length: int, dtype: torch.dtype, reps: int) -> float:
    q, k, v = (torch.randn(1, 9, length, 64, dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(1, 9, length, 64, dtype=dtype)

    def call() -> None:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)

    for _ in range(3):
        call()
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", type=int, nargs="*", default=[64, 128, 170, 256, 320, 384, 512, 1024])
    parser.add_argument("--reps", type=int, default=21)
    args = parser.parse_args()
    print(f"| row tokens | fp32 ms | bf16 ms | bf16 / fp32 |  ({torch.get_num_threads()} thread(s))")
    print("|---:|---:|---:|---:|")
    for length in args.lengths:
        fp32, bf16 = (milliseconds(length, dtype, args.reps) for dtype in (torch.float32, torch.bfloat16))
        print(f"| {length} | {fp32:.2f} | {bf16:.2f} | {bf16 / fp32:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
