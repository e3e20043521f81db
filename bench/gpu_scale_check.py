"""GPU check of the sharding engines (bench/gpu_scale_check.sh runs it).

On one CUDA GPU (world size 1, through torchrun as the app launches it):
ZeRO-3 with CPU offload and FSDP2 each train a LoRA and a full run of a model
with the architecture of Qwen2.5-0.5B (random weights, the demo tokenizer):
3 steps with a checkpoint, a resume to step 6, final/ gathered and loaded
back as an ordinary Hugging Face folder; then the measured peak GPU memory
(summary.json) against the per-GPU estimate (backend/models/memory.py).

--dry-run (any machine): builds the model with 2 layers, writes each case's
config, prints its launch command and estimate, and runs the worker, which
on a machine without CUDA or DeepSpeed must refuse with exit code 2 and its
sentence (that is checked).
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
from backend.models.memory import Architecture, estimate_memory, shard  # noqa: E402
from backend.scale.launch import worker_command  # noqa: E402

# Qwen2.5-0.5B's config.json numbers.
QWEN05 = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
              num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, tie_word_embeddings=True)
CASES = [("deepspeed_zero3", True, "lora"), ("deepspeed_zero3", True, "full"),
         ("fsdp", False, "lora"), ("fsdp", False, "full")]
SETTINGS = dict(dataset="demo", max_steps=3, save_steps=3, logging_steps=1, per_device_train_batch_size=4,
                cutoff_len=512, val_size=0.0, precision="bf16", devices="auto", learning_rate=1e-4)


def build_model(folder: Path, layers: int) -> Path:
    """Random weights with Qwen2.5-0.5B's shape and the demo model's tokenizer + chat template."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from backend.models.demo import build_pretraining_corpus, train_tokenizer

    # The demo model's tokenizer and chat template (trained in seconds; no pre-training needed here).
    tokenizer = train_tokenizer([context + text for context, text in build_pretraining_corpus()])
    config = Qwen2Config(**{**QWEN05, "num_hidden_layers": layers}, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).to(torch.bfloat16).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def estimate(config: RunConfig, model: Path):
    arch = Architecture.from_folder(model)
    base = estimate_memory(arch, method=config.method, precision="bf16", batch_size=config.per_device_train_batch_size,
                           cutoff_len=config.cutoff_len, lora_r=config.lora_r, lora_dropout=config.lora_dropout)
    return shard(base, arch, config.distributed, 1, config.cpu_offload, "bf16")


def run(argv: list[str], log: Path, env: dict, timeout: int) -> int:
    with open(log, "ab") as handle:
        return subprocess.run(argv, cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT, timeout=timeout).returncode


def check_final(run_dir: Path, method: str) -> str:
    """final/ loads back with plain transformers / peft (ZeRO-3 / FSDP weights gathered)."""
    from transformers import AutoModelForCausalLM

    final = run_dir / "final"
    if method == "lora":
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(final)
    else:
        model = AutoModelForCausalLM.from_pretrained(final)
    return f"{sum(p.numel() for p in model.parameters()) / 1e6:.0f} M parameters"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="configs, commands, guards; no GPU needed")
    parser.add_argument("--keep", type=Path, help="keep the runs in this folder")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="gpu-scale-"))
    (root / "runs").mkdir(parents=True, exist_ok=True)
    model = build_model(root / "qwen2.5-0.5b-random", layers=2 if args.dry_run else 24)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    rows, failures = [], 0
    for distributed, offload, method in CASES:
        name = f"{distributed}{'-offload' if offload else ''}-{method}"
        config = RunConfig(model_name_or_path=str(model), replay="off", method=method, distributed=distributed,
                           cpu_offload=offload, **SETTINGS)
        run_dir = root / "runs" / name
        run_dir.mkdir(exist_ok=True)
        config.save(run_dir / "config.yaml")
        argv = worker_command(["--config", str(run_dir / "config.yaml"), "--run-dir", str(run_dir)], config, 1)
        expected = estimate(config, model)
        print(f"== {name}: estimate {expected.total_gb:.2f} GiB per GPU (+ {expected.cpu_offload_gb:.2f} GiB CPU)\n"
              f"   {' '.join(argv)}", flush=True)
        started = time.time()
        code = run(argv, run_dir / "launcher.log", env, 300)
        if args.dry_run:
            status = json.loads((run_dir / "status.json").read_text()) if (run_dir / "status.json").exists() else {}
            refused = code != 0 and "needs" in (status.get("error") or "")
            print(f"   dry run: exit {code}, {status.get('error') or 'no status'}", flush=True)
            failures += 0 if (refused or code == 0) else 1
            continue
        resume = worker_command(["--resume", str(run_dir), "--set", "max_steps=6"], config, 1)
        code = code or run(resume, run_dir / "launcher.log", env, 300)
        summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
        ok = code == 0 and summary.get("global_step") == 6 and (run_dir / "final" / "COMPLETE").exists()
        loaded = check_final(run_dir, method) if ok else "-"
        failures += 0 if ok else 1
        rows.append((name, ok, summary.get("peak_allocated_gb"), expected.total_gb, loaded, time.time() - started))
        print(f"   {'ok' if ok else 'FAILED (see ' + str(run_dir / 'train.log') + ')'}: step "
              f"{summary.get('global_step')}, peak {summary.get('peak_allocated_gb')} GiB, final/: {loaded}", flush=True)
    if rows:
        print("\n| case | ok | peak allocated GiB | estimate GiB | final/ | seconds |\n|---|---|---:|---:|---|---:|")
        for name, ok, peak, est, loaded, secs in rows:
            print(f"| {name} | {'yes' if ok else 'no'} | {peak} | {est:.2f} | {loaded} | {secs:.0f} |")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
