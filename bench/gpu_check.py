"""GPU check: the plain Hugging Face Trainer against the worker on real-size
architectures, one markdown table. Prepared for one CUDA GPU (about 8 minutes
on an H200, bf16); never part of the test suite.

Cases (random weights, built locally from the architectures' config numbers;
LoRA r 16 all-linear, sequence 1024, batch 4 with accumulation 2 as in
LLaMA-Factory's published table):
  qwen0.5b       Qwen2.5-0.5B architecture, LoRA
  llama7b        a 7B Llama (Llama-2-7B numbers), LoRA
  llama7b-qlora  the same, QLoRA 4-bit (NF4)

Each case runs twice, each in its own process:
  plain   the tutorial script: DataCollatorForSeq2Seq padding, random batches,
          adamw_torch, lora_dropout 0.05, sdpa, the model's own loss
          (QLoRA: prepare_model_for_kbit_training with its default checkpointing)
  worker  python -m backend.train: packing, fused AdamW (optim auto), Liger
          kernels where liger-kernel is installed, FlashAttention-2 where
          flash-attn is installed (else sdpa), chunked loss, gradient
          checkpointing auto
Columns: non-padding tokens/s per GPU (end of step 1 to the last step), peak
memory (torch.cuda.max_memory_reserved), model FLOPs utilisation against the
GPU's dense bf16 peak (--peak-tflops, H200: 989), and the worker's memory
estimate (backend/models/memory.py) against its measured peak.

    python bench/gpu_check.py                 # on a CUDA machine
    python bench/gpu_check.py --dry-run       # tiny shapes, fp32, on the CPU (what the tests run)
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
DATA = REPO.parent / "shared" / "data" / "alpaca_en_demo.json"
sys.path.insert(0, str(REPO))

ARCHS = {  # config.json numbers
    "qwen0.5b": dict(model_type="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                     num_attention_heads=14, num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
                     rope_theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=32768),
    "llama7b": dict(model_type="llama", hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=32, vocab_size=32000, tie_word_embeddings=False,
                    rope_theta=10000.0, rms_norm_eps=1e-5, max_position_embeddings=4096),
}
CASES = {"qwen0.5b": ("qwen0.5b", "lora"), "llama7b": ("llama7b", "lora"), "llama7b-qlora": ("llama7b", "qlora")}
DRY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
           vocab_size=1024, max_position_embeddings=512)


def build_model(name: str, folder: Path, dry: bool) -> Path:
    """Random weights with the architecture's numbers and a byte-level BPE trained on the instruction rows."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from bench.real_size_model import train_tokenizer

    if (folder / "BUILT").is_file():
        return folder
    numbers = {**ARCHS[name], **(DRY if dry else {})}
    tokenizer = train_tokenizer(vocab_size=min(49152, numbers["vocab_size"]))
    config = AutoConfig.for_model(**numbers, eos_token_id=tokenizer.eos_token_id,
                                  pad_token_id=tokenizer.pad_token_id, use_cache=False)
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32 if dry else torch.bfloat16)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "BUILT").write_text("ok\n")
    return folder


def rows_file(work: Path) -> Path:
    """The shared alpaca rows where they are (../shared/data), else the demo rows."""
    if DATA.is_file():
        return DATA
    from backend.models.demo_facts import build_demo_rows

    path = work / "rows.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in build_demo_rows()))
    return path


def settings(args) -> dict:
    return dict(cutoff=64 if args.dry_run else 1024, batch=2 if args.dry_run else 4, accumulation=2,
                steps=args.steps or (3 if args.dry_run else 12))


def run_worker(model: Path, method: str, data: Path, work: Path, args) -> dict:
    import importlib.util

    from backend.config import RunConfig

    s = settings(args)
    run_dir = work / f"worker-{method}-{time.time_ns()}"
    config = RunConfig(model_name_or_path=str(model), dataset=str(data), replay="off", method=method, cutoff_len=s["cutoff"],
                       per_device_train_batch_size=s["batch"], gradient_accumulation_steps=s["accumulation"],
                       max_steps=s["steps"], logging_steps=s["steps"], save_steps=100_000, val_size=0,
                       learning_rate=2e-4, precision="fp32" if args.dry_run else "bf16",
                       use_liger_kernel=not args.dry_run and importlib.util.find_spec("liger_kernel") is not None)
    config_file = work / "worker.yaml"
    config.save(config_file)
    with open(work / "worker.log", "a") as log:
        subprocess.run([sys.executable, "-m", "backend.train", "--config", str(config_file), "--run-dir", str(run_dir),
                        "--workspace", str(work / "ws")], cwd=REPO, env=_env(), check=True, stdout=log, stderr=log)
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    summary = json.loads((run_dir / "summary.json").read_text())
    peak = summary.get("peak_reserved_gb") or summary["peak_rss_gb"]
    log_text = (run_dir / "train.log").read_text()
    return {"tokens_per_second": (train[-1]["tokens_seen"] - train[0]["tokens_seen"]) / (train[-1]["time"] - train[0]["time"]),
            "peak_gb": peak, "estimate_gb": _estimate(model, config), "packed": "batches: packed" in log_text}


def _estimate(model: Path, config) -> float:
    from backend.models.memory import Architecture, choose_checkpointing, config_estimate_kwargs, estimate_memory

    arch = Architecture.from_folder(model)
    kind = "cpu" if config.precision == "fp32" else "cuda"
    kwargs = config_estimate_kwargs(config, config.precision, kind)
    memory = _device_memory_gb()
    on, _ = choose_checkpointing(config.gradient_checkpointing, memory, arch=arch, **kwargs)
    return estimate_memory(arch, gradient_checkpointing=on, **kwargs).total_gb


def _device_memory_gb() -> float:
    from backend.models.hardware import detect_devices

    return detect_devices()[0].memory_gb


def run_plain(model: Path, method: str, data: Path, work: Path, args) -> dict:
    out = work / f"plain-{time.time_ns()}.json"
    command = [sys.executable, __file__, "--plain-run", str(out), "--model", str(model), "--method", method,
               "--data", str(data), *(["--dry-run"] if args.dry_run else []), *(["--steps", str(args.steps)] if args.steps else [])]
    with open(work / "plain.log", "a") as log:
        subprocess.run(command, cwd=REPO, env=_env(), check=True, stdout=log, stderr=log)
    return json.loads(out.read_text())


def plain_script(out: Path, model_path: Path, method: str, data: Path, args) -> None:
    """The tutorial: Dataset.map tokenisation, DataCollatorForSeq2Seq, the default random sampler."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        BitsAndBytesConfig,
        DataCollatorForSeq2Seq,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    from backend.data.encode import encode_messages
    from backend.data.resolve import load_rows

    s = settings(args)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    rows, _ = load_rows(data)

    def tokenize(row):
        enc = encode_messages(tokenizer, row["messages"], s["cutoff"])
        return {"input_ids": enc.input_ids, "attention_mask": [1] * len(enc.input_ids), "labels": enc.labels}

    dataset = Dataset.from_list(rows).map(tokenize, remove_columns=list(rows[0].keys()))
    dtype = torch.float32 if args.dry_run else torch.bfloat16
    kwargs = {"dtype": dtype, "attn_implementation": "sdpa"}
    if method == "qlora":
        kwargs["quantization_config"] = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                           bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=dtype)
    model = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
    if method == "qlora":
        model = prepare_model_for_kbit_training(model)
    model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", r=16, lora_alpha=32, lora_dropout=0.05,
                                             target_modules="all-linear"))
    marks = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            marks.append((time.time(), state.num_input_tokens_seen))

    training = TrainingArguments(output_dir=str(out.parent / "plain-out"), max_steps=s["steps"],
                                 per_device_train_batch_size=s["batch"], gradient_accumulation_steps=s["accumulation"],
                                 learning_rate=2e-4, bf16=not args.dry_run, use_cpu=args.dry_run, logging_steps=5,
                                 save_strategy="no", report_to=[], include_num_input_tokens_seen="non_padding",
                                 seed=42, disable_tqdm=True)
    Trainer(model=model, args=training, train_dataset=dataset, processing_class=tokenizer, callbacks=[Clock()],
            data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True)).train()
    (t0, n0), (t1, n1) = marks[0], marks[-1]
    import resource

    peak = (torch.cuda.max_memory_reserved() / 2**30 if torch.cuda.is_available()
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)
    out.write_text(json.dumps({"tokens_per_second": (n1 - n0) / (t1 - t0), "peak_gb": peak}))


def flops_per_token(model: Path, method: str, cutoff: int) -> float:
    """Forward 2N + backward to the activations 2N (+ 2N weight gradients when every weight trains),
    N = non-embedding parameters, plus causal attention over rows of about cutoff / 2 tokens."""
    from backend.models.memory import Architecture

    arch = Architecture.from_folder(model)
    n = arch.num_hidden_layers * arch.layer_linear_params() + arch.hidden_size * arch.vocab_size  # + the head
    passes = 6 if method == "full" else 4
    attention = passes * arch.num_hidden_layers * arch.num_attention_heads * arch.head_dim * cutoff / 2
    return passes * n + attention


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes, fp32, runs on the CPU")
    parser.add_argument("--cases", nargs="*", choices=list(CASES), default=list(CASES))
    parser.add_argument("--steps", type=int, help="optimizer steps per run (default 12, dry run 3)")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="the GPU's dense bf16 peak (H200: 989)")
    parser.add_argument("--work", type=Path, help="folder for models and runs (default: a new temporary one)")
    parser.add_argument("--plain-run", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_run:
        plain_script(args.plain_run, args.model, args.method, args.data, args)
        return
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        sys.exit("No CUDA device here: run on a GPU machine, or with --dry-run for tiny shapes on the CPU.")
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    (work / "ws" / "models").mkdir(parents=True, exist_ok=True)
    data = rows_file(work)
    rows = []
    for case in args.cases:
        arch, method = CASES[case]
        model = build_model(arch, work / f"model-{arch}", args.dry_run)
        results = {"plain": run_plain(model, method, data, work, args),
                   "worker": run_worker(model, method, data, work, args)}
        for script, result in results.items():
            mfu = result["tokens_per_second"] * flops_per_token(model, method, settings(args)["cutoff"]) / (args.peak_tflops * 1e12)
            rows.append((case, script, result, mfu))
            print(json.dumps({"case": case, "script": script, **result, "mfu": mfu}), flush=True)
    print(table(rows, args))


def table(rows: list, args) -> str:
    device = "CPU (dry run, tiny shapes)" if args.dry_run else __import__("torch").cuda.get_device_name(0)
    s = settings(args)
    lines = [f"{device}; sequence {s['cutoff']}, batch {s['batch']} x accumulation {s['accumulation']}, "
             f"{s['steps']} steps, {'fp32' if args.dry_run else 'bf16'}, LoRA r16 all-linear",
             "", "| case | script | non-padding tokens/s per GPU | peak memory GiB | MFU | estimate GiB (error) |",
             "|---|---|---|---|---|---|"]
    for case, script, r, mfu in rows:
        estimate = f"{r['estimate_gb']:.2f} ({(r['estimate_gb'] - r['peak_gb']) / r['peak_gb']:+.0%})" if "estimate_gb" in r else "-"
        lines.append(f"| {case} | {script} | {r['tokens_per_second']:.0f} | {r['peak_gb']:.2f} | {mfu:.1%} | {estimate} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
