"""Training throughput at a real size: the worker against the plain tutorial
Trainer script and LLaMA-Factory 0.9.5, on SmolLM2-135M's architecture.

Model: the real starter, SmolLM2-135M-Instruct (bench/real_size_model.py resolves
and converts it; --model PATH for another folder, e.g. the random-weights
architecture with a BPE trained here, which is the fallback). Data:
../shared/data/alpaca_en_demo.json. Every script: LoRA r 16 / alpha 32 on all
linear layers, batch 8, cutoff 512, fp32 on the CPU, the same number of steps.

  worker      python -m backend.train with its defaults (packing, chunked loss,
              fused AdamW, lora_dropout 0)
  plain       the tutorial Trainer script of bench/bench_train_throughput.py
              (DataCollatorForSeq2Seq, random batches, lora_dropout 0.05)
  lf          llamafactory-cli train with a YAML of the same settings
              (template chatml, use_cpu, its defaults: lora_dropout 0; default_system
              = the system prompt the model's own template inserts, so every
              script trains on the same tokens)
  lf-packing  the same with LLaMA-Factory's own packing (rows joined up to cutoff_len;
              batch 3 packed rows, about the 8 rows of the others per step)

LLaMA-Factory turns gradient checkpointing on by default; the worker's "auto"
leaves it off where the run fits. Two more variants compare each at the
other's setting (not run unless named with --only):

  worker-ckpt         the worker with gradient_checkpointing: true
  lf-packing-no-ckpt  lf-packing with disable_gradient_checkpointing: true
  worker-compile      the worker with torch_compile: true (first_step_s, from the
                      start of training to the end of step 1, holds the compile)
  worker-bf16         the worker with precision: bf16 (a CPU with AVX512-BF16 or AMX;
                      "worker" itself is precision: fp32, the CPU's auto)
  lf-packing-bf16     lf-packing-no-ckpt with bf16: true
  worker-bf16-compile worker-bf16 with torch_compile: true
  plain-dropout-0     plain with lora_dropout 0, the worker's default (the same settings)

Runs alternate (the order is reversed every repetition), each in its own
process. tokens/s = non-padding tokens trained between the end of step 1 and
the end of the last step over that wall time, as each script counts them
(Trainer's non_padding count); peak memory = the run's ru_maxrss (a wrapper
process waits for it). LLaMA-Factory (VENV) is installed by
../shared/bench/install_llamafactory.sh.

    nice .venv/bin/python bench/bench_real_size.py --reps 3 --steps 4 --lf-venv .cache/lf-venv
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "alpaca_en_demo.json"
sys.path.insert(0, str(REPO))
SCRIPTS = ("worker", "plain", "lf", "lf-packing")
EXTRA = ("worker-ckpt", "lf-packing-no-ckpt", "worker-compile", "worker-bf16", "lf-packing-bf16",
         "worker-bf16-compile", "plain-dropout-0")
# Runs one command and prints the peak RSS (KiB) of the process tree it waited for.
PEAK = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")


def measured(command: list[str], env: dict, log: Path) -> float:
    """Run `command` under the peak-memory wrapper; returns its peak RSS in GiB."""
    with open(log, "w") as out:
        result = subprocess.run([sys.executable, "-c", PEAK, *command], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=out, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed, see {log}")
    return int(result.stdout.strip().splitlines()[-1]) / 2**20


def run_worker(ws: Path, model: Path, steps: int, cutoff: int = 512, **settings) -> dict:
    from backend.config import RunConfig

    run_dir = ws / "runs" / f"worker-{time.time_ns()}"
    config = ws / "worker.yaml"
    # replay off: "auto" would mix the base model's answers into this 999-row set (and generate them
    # first); every script trains on the same alpaca rows.
    settings = {"logging_steps": steps, "replay": "off", **settings}
    RunConfig(model_name_or_path=str(model), dataset=str(DATA), max_steps=steps, per_device_train_batch_size=8,
              cutoff_len=cutoff, val_size=0, learning_rate=2e-4, save_steps=100_000,
              save_total_limit=1, **settings).save(config)
    peak = measured([sys.executable, "-m", "backend.train", "--config", str(config), "--run-dir", str(run_dir),
                     "--workspace", str(ws)], _env(), ws / "worker.log")
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    first, last = train[0], train[-1]
    start = next(r["time"] for r in records if r.get("event") == "start")
    return {"tokens_per_second": (last["tokens_seen"] - first["tokens_seen"]) / (last["time"] - first["time"]),
            "peak_rss_gb": peak, "first_step_s": round(first["time"] - start, 1),
            # With logging_steps 1: each step's seconds and tokens (compiled steady state, recompiles).
            "step_times": [[round(b["time"] - a["time"], 1), b["tokens_seen"] - a["tokens_seen"]]
                      for a, b in zip(train, train[1:])] if settings["logging_steps"] == 1 else None}


def run_plain(ws: Path, model: Path, steps: int, cutoff: int = 512, lora_dropout: float = 0.05) -> dict:
    out = ws / f"plain-{time.time_ns()}.json"
    peak = measured([sys.executable, str(REPO / "bench" / "bench_train_throughput.py"), "--plain", str(out),
                     "--steps", str(steps), "--batch", "8", "--cutoff", str(cutoff), "--workspace", str(ws), "--lora-dropout", str(lora_dropout),
                     "--model-path", str(model)], _env(), ws / "plain.log")
    return {**json.loads(out.read_text()), "peak_rss_gb": peak}


def template_system_prompt(model: Path) -> str | None:
    """The system prompt the model's chat template inserts into a row without one (SmolLM2-Instruct's
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face"), or None. The worker and
    the plain script render rows through that template; LLaMA-Factory's chatml gets it as default_system."""
    from backend.models.loading import load_tokenizer

    text = load_tokenizer(model).apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
    head = "<|im_start|>system\n"
    return text[len(head):text.index("<|im_end|>")] if text.startswith(head) else None


def lf_yaml(ws: Path, model: Path, steps: int, packing: bool, checkpointing: bool = True, bf16: bool = False) -> Path:
    (ws / "lf-data").mkdir(exist_ok=True)
    (ws / "lf-data" / "dataset_info.json").write_text(json.dumps({"bench_alpaca": {"file_name": str(DATA)}}))
    out = ws / f"lf-out-{time.time_ns()}"
    settings = {
        "model_name_or_path": str(model), "stage": "sft", "do_train": True, "finetuning_type": "lora",
        "lora_rank": 16, "lora_alpha": 32, "lora_target": "all", "dataset": "bench_alpaca",
        "dataset_dir": str(ws / "lf-data"), "template": "chatml", "cutoff_len": 512, "packing": packing,
        "overwrite_cache": True, "output_dir": str(out), "logging_steps": 1, "save_strategy": "no",
        # With packing a "row" is cutoff_len tokens of joined rows (about 2.8 alpaca rows here):
        # 3 packed rows per step train about as many rows per step as the others' 8.
        "per_device_train_batch_size": 3 if packing else 8, "gradient_accumulation_steps": 1, "learning_rate": 2e-4,
        "max_steps": steps, "lr_scheduler_type": "cosine", "warmup_ratio": 0.05, "use_cpu": True,
        "report_to": "none", "include_num_input_tokens_seen": "non_padding", "plot_loss": False,
        "val_size": 0, "seed": 42, "disable_tqdm": True,
        "disable_gradient_checkpointing": not checkpointing,  # LLaMA-Factory's default: checkpointing on
        "bf16": bf16,
    }
    system = template_system_prompt(model)
    if system is not None:
        settings["default_system"] = system
    path = ws / f"lf-{'packing' if packing else 'plain'}.yaml"
    import yaml

    path.write_text(yaml.safe_dump(settings))
    return path


def run_lf(ws: Path, model: Path, steps: int, venv: Path, packing: bool, checkpointing: bool = True,
           bf16: bool = False) -> dict:
    config = lf_yaml(ws, model, steps, packing, checkpointing, bf16)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", DISABLE_VERSION_CHECK="1",
               PYTHONPATH="")
    peak = measured([str(venv / "bin" / "llamafactory-cli"), "train", str(config)], env,
                    ws / f"lf-{packing}.log")
    out = Path(__import__("yaml").safe_load(config.read_text())["output_dir"])
    logs = [json.loads(x) for x in (out / "trainer_log.jsonl").read_text().splitlines()]
    logs = [r for r in logs if "loss" in r]  # one line per step (the last line repeats the end)
    # trainer_log.jsonl: throughput = tokens seen / seconds since training began, per step.
    seconds = [r["total_tokens"] / r["throughput"] for r in logs]
    return {"tokens_per_second": (logs[-1]["total_tokens"] - logs[0]["total_tokens"]) / (seconds[-1] - seconds[0]),
            "peak_rss_gb": peak}


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--model", type=Path, help="a model folder (default: the real starter, converted on first "
                        "use; a folder without config.json gets the random-weights architecture built into it)")
    parser.add_argument("--cutoff", type=int, default=512, help="worker and plain only (LLaMA-Factory: 512)")
    parser.add_argument("--lf-venv", type=Path, help="LLaMA-Factory's virtual environment (left out when absent)")
    parser.add_argument("--results", type=Path, help="JSON lines, one per run, written as runs finish")
    parser.add_argument("--only", nargs="*", choices=SCRIPTS + EXTRA,
                        help="the scripts to run (default: the first four)")
    args = parser.parse_args()
    from bench.real_size_model import describe, model_folder

    model = model_folder(args.model)
    ws = Path(tempfile.mkdtemp(prefix="bench-real-"))
    (ws / "models").mkdir()
    names = [n for n in (args.only or SCRIPTS) if args.lf_venv or not n.startswith("lf")]
    runners = {"worker": lambda: run_worker(ws, model, args.steps, args.cutoff, precision="fp32"),
               "worker-bf16": lambda: run_worker(ws, model, args.steps, precision="bf16"),
               "worker-bf16-compile": lambda: run_worker(ws, model, args.steps, precision="bf16", torch_compile=True,
                                                         logging_steps=1),
               "lf-packing-bf16": lambda: run_lf(ws, model, args.steps, args.lf_venv, True, checkpointing=False,
                                                 bf16=True),
               "plain": lambda: run_plain(ws, model, args.steps, args.cutoff),
               "plain-dropout-0": lambda: run_plain(ws, model, args.steps, args.cutoff, lora_dropout=0.0),
               "lf": lambda: run_lf(ws, model, args.steps, args.lf_venv, False),
               "lf-packing": lambda: run_lf(ws, model, args.steps, args.lf_venv, True),
               "worker-ckpt": lambda: run_worker(ws, model, args.steps, gradient_checkpointing=True),
               "lf-packing-no-ckpt": lambda: run_lf(ws, model, args.steps, args.lf_venv, True, checkpointing=False),
               "worker-compile": lambda: run_worker(ws, model, args.steps, torch_compile=True,
                                                     logging_steps=1)}
    results = {name: [] for name in names}
    for rep in range(args.reps):
        for name in (names if rep % 2 == 0 else names[::-1]):
            load_before = os.getloadavg()[0]  # the machine is shared: each run's 1-minute load
            try:
                result = runners[name]()
            except (RuntimeError, OSError, KeyError, IndexError, ValueError) as error:
                print(json.dumps({"script": name, "rep": rep, "error": str(error)}), flush=True)
                continue
            results[name].append({**result, "rep": rep, "load": [load_before, os.getloadavg()[0]]})
            line = json.dumps({"script": name, "rep": rep, **results[name][-1]})
            print(line, flush=True)
            if args.results:
                with open(args.results, "a") as handle:
                    handle.write(line + "\n")
    report(results, args.reps, args.steps, args.cutoff, describe(model))


def report(results: dict, reps: int, steps: int, cutoff: int, model: str) -> None:
    median = {n: {k: statistics.median(r[k] for r in runs) for k in ("tokens_per_second", "peak_rss_gb")}
              for n, runs in results.items() if runs}
    print(f"\n{reps} repetitions x {steps} steps, batch 8, cutoff {cutoff}, LoRA r16 all-linear, "
          f"{model}, fp32 CPU unless named")
    print("| script | non-padding tokens/s (median) | peak RSS GiB (median) | worker speed ratio | worker memory ratio "
          "| runs (tokens/s) |")
    print("|---|---|---|---|---|---|")
    base = median.get("worker") or median.get("worker-ckpt")  # ratios against the first worker variant
    for name, m in median.items():
        each = ", ".join(f"{r['tokens_per_second']:.1f}" for r in results[name])
        speed = base["tokens_per_second"] / m["tokens_per_second"] if base else float("nan")
        memory = base["peak_rss_gb"] / m["peak_rss_gb"] if base else float("nan")
        print(f"| {name} | {m['tokens_per_second']:.1f} | {m['peak_rss_gb']:.2f} | {speed:.2f}x | {memory:.2f}x | {each} |")
    pair_ratios(results)


def pair_ratios(results: dict) -> None:
    """The first worker variant's tokens/s over each other script's, repetition by repetition: the two
    ran next to each other, so each ratio is under one load, where the medians mix loads."""
    base = "worker" if results.get("worker") else "worker-ckpt"
    runs = {name: {r["rep"]: r for r in rs} for name, rs in results.items()}
    others = [n for n in runs if n != base]
    if base not in runs or not others:
        return
    print("\n| repetition (1-minute load at its runs) | " + " | ".join(f"{base} / {n}" for n in others) + " |")
    print("|---" * (len(others) + 1) + "|")
    for rep, mine in sorted(runs[base].items()):
        loads = [x for n in runs for x in runs[n].get(rep, {}).get("load", [])]
        cells = [f"{mine['tokens_per_second'] / runs[n][rep]['tokens_per_second']:.2f}x" if rep in runs[n] else "-"
                 for n in others]
        print(f"| {rep + 1} ({min(loads):.1f}-{max(loads):.1f}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
