"""The docs/SCALE.md table: which `distributed` setting lets a model train, from
the memory estimate (backend/models/memory.py, docs/MEMORY.md "Sharding").

    python bench/scale_table.py [--gpu-gb 80] [--cutoff 2048] [--batch 1]

For each model size, method and GPU count it picks the first setting that
fits one GPU: auto (DDP) -> deepspeed_zero2 -> fsdp (ZeRO-3 counts the same, less
the backward overlap of full fine-tuning, docs/MEMORY.md "Sharding") ->
deepspeed_zero3 + cpu_offload, and prints the per-GPU GiB (offload: + CPU GiB
per GPU process). bf16, gradient checkpointing on, AdamW. QLoRA never uses
ZeRO-3 / FSDP (refused by backend/scale/guards.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.models.memory import Architecture, estimate_memory, shard  # noqa: E402

# Published config.json numbers (hidden, intermediate, layers, heads, kv heads, vocab, tied).
MODELS = {
    "0.5B (Qwen2.5)": (896, 4864, 24, 14, 2, 151936, True),
    "1.5B (Qwen2.5)": (1536, 8960, 28, 12, 2, 151936, True),
    "7B (Qwen2.5)": (3584, 18944, 28, 28, 4, 152064, False),
    "14B (Qwen2.5)": (5120, 13824, 48, 40, 8, 152064, False),
    "32B (Qwen2.5)": (5120, 27648, 64, 40, 8, 152064, False),
    "70B (Llama 3.1)": (8192, 28672, 80, 64, 8, 128256, False),
}
METHODS = {"LoRA": ("lora", None), "QLoRA": ("qlora", 4), "full": ("full", None)}
GPUS = (1, 2, 4, 8)
SETTINGS = (("auto", False), ("deepspeed_zero2", False), ("fsdp", False), ("deepspeed_zero3", True))
SHORT = {"auto": "DDP", "deepspeed_zero2": "ZeRO-2", "fsdp": "FSDP", "deepspeed_zero3": "ZeRO-3+offload"}


def architecture(numbers: tuple) -> Architecture:
    h, i, layers, heads, kv, vocab, tied = numbers
    return Architecture(hidden_size=h, intermediate_size=i, num_hidden_layers=layers, num_attention_heads=heads,
                        num_key_value_heads=kv, vocab_size=vocab, head_dim=h // heads, tie_word_embeddings=tied)


def choose(arch: Architecture, method: str, bits: int | None, gpus: int, gpu_gb: float, cutoff: int,
           batch: int) -> str:
    base = estimate_memory(arch, method=method, precision="bf16", batch_size=batch, cutoff_len=cutoff,
                           gradient_checkpointing=True, quantization_bits=bits, lora_r=16)
    for distributed, offload in SETTINGS:
        if method == "qlora" and distributed in ("fsdp", "deepspeed_zero3"):
            continue
        if gpus == 1 and distributed in ("deepspeed_zero2", "fsdp"):
            continue  # nothing to shard over
        per_gpu = shard(base, arch, distributed, gpus, cpu_offload=offload, precision="bf16")
        if per_gpu.fits(gpu_gb):
            extra = f" + {per_gpu.cpu_offload_gb:.0f} CPU" if per_gpu.cpu_offload_gb else ""
            return f"{SHORT[distributed]} {per_gpu.total_gb:.0f}{extra}"
    return "does not fit"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-gb", type=float, default=80.0)
    parser.add_argument("--cutoff", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    print(f"GPUs of {args.gpu_gb:g} GiB, batch {args.batch} x cutoff {args.cutoff}, bf16, gradient checkpointing;"
          f" cell = setting and GiB per GPU\n")
    print("| model | method | " + " | ".join(f"{n} GPU" for n in GPUS) + " |")
    print("|---|---|" + "---|" * len(GPUS))
    for name, numbers in MODELS.items():
        arch = architecture(numbers)
        for label, (method, bits) in METHODS.items():
            cells = [choose(arch, method, bits, n, args.gpu_gb, args.cutoff, args.batch) for n in GPUS]
            print(f"| {name} | {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
