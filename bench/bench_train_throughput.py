"""Training throughput: the worker against a plain Trainer script written the
way the usual tutorial does it.

Both train LoRA (same r / alpha / targets / learning rate) on the demo model,
with the same data (../shared/data/alpaca_en_demo.json), batch size, number of
steps and cutoff, and the same tokenisation (backend.data.encode). The only
differences are the worker's: a length-grouped sampler and padding to the
longest row of each batch (multiple of 8), against the tutorial's random
batches through DataCollatorForSeq2Seq (dynamic padding too). Runs alternate
(worker, plain, plain, worker, ...) so machine load affects both alike.

Measured per run:
  tokens/s  non-padding tokens (the Trainer's "non_padding" count) trained
            between the end of step 1 and the end of the last step, divided by
            that wall time (model loading, data encoding and saving excluded)
  peak RSS  the process's peak resident memory (ru_maxrss), whole run

    nice .venv/bin/python bench/bench_train_throughput.py [--reps 3] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "alpaca_en_demo.json"
sys.path.insert(0, str(REPO))
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)


def run_worker(workspace: Path, steps: int, batch: int, cutoff: int) -> dict:
    from backend.config_recipes import tiny_config

    run_dir = workspace / "runs" / f"bench-{time.time_ns()}"
    config_file = workspace / "bench.yaml"
    tiny_config(dataset=str(DATA), max_steps=steps, per_device_train_batch_size=batch, cutoff_len=cutoff,
              val_size=0, save_steps=10_000, save_total_limit=1).save(config_file)
    subprocess.run([sys.executable, "-m", "backend.train", "--config", str(config_file), "--run-dir", str(run_dir),
                    "--workspace", str(workspace)], cwd=REPO, env=_env(), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    train = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in train if r["kind"] == "train"]
    first, last = train[0], train[-1]  # step 1 and the last step
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"tokens_per_second": (last["tokens_seen"] - first["tokens_seen"]) / (last["time"] - first["time"]),
            "peak_rss_gb": summary["peak_rss_gb"], "steps": last["step"]}


def run_plain(workspace: Path, steps: int, batch: int, cutoff: int) -> dict:
    out = workspace / f"plain-{time.time_ns()}.json"
    subprocess.run([sys.executable, __file__, "--plain", str(out), "--steps", str(steps), "--batch", str(batch),
                    "--cutoff", str(cutoff), "--workspace", str(workspace)], cwd=REPO, env=_env(), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())


def plain_script(out: Path, steps: int, batch: int, cutoff: int, workspace: Path, model_path: Path | None = None,
                 lora_dropout: float = 0.05) -> None:
    """The tutorial: Dataset.map tokenisation, DataCollatorForSeq2Seq, default random sampler."""
    from datasets import Dataset
    from peft import LoraConfig, get_peft_model
    from transformers import DataCollatorForSeq2Seq, Trainer, TrainerCallback, TrainingArguments

    from backend.data.encode import encode_messages
    from backend.data.resolve import load_rows
    from backend.models.loading import load_model, load_tokenizer, resolve_model_path

    path = str(model_path) if model_path else resolve_model_path("demo", workspace / "models")
    tokenizer = load_tokenizer(path)
    rows, _ = load_rows(DATA)

    def tokenize(row):
        enc = encode_messages(tokenizer, row["messages"], cutoff)
        return {"input_ids": enc.input_ids, "attention_mask": [1] * len(enc.input_ids), "labels": enc.labels}

    data = Dataset.from_list(rows).map(tokenize, remove_columns=["messages"])
    model = get_peft_model(load_model(path), LoraConfig(task_type="CAUSAL_LM", r=16, lora_alpha=32,
                                                        lora_dropout=lora_dropout, target_modules="all-linear"))
    marks = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            marks.append((time.time(), state.num_input_tokens_seen))

    args = TrainingArguments(output_dir=str(workspace / "plain-out"), max_steps=steps,
                             per_device_train_batch_size=batch, learning_rate=2e-4, lr_scheduler_type="cosine",
                             warmup_steps=0.05, logging_steps=5, save_strategy="no", report_to=[],
                             include_num_input_tokens_seen="non_padding", seed=42, disable_tqdm=True)
    Trainer(model=model, args=args, train_dataset=data, processing_class=tokenizer, callbacks=[Clock()],
            data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True)).train()
    (t0, n0), (t1, n1) = marks[0], marks[-1]
    out.write_text(json.dumps({"tokens_per_second": (n1 - n0) / (t1 - t0), "steps": len(marks),
                               "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--cutoff", type=int, default=512)
    parser.add_argument("--workspace", type=Path)
    parser.add_argument("--models", type=Path, default=user_cache_dir() / "test-models",
                        help="Where the demo model is built / cached.")
    parser.add_argument("--plain", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--model-path", type=Path, help=argparse.SUPPRESS)  # bench_real_size.py: another model
    parser.add_argument("--lora-dropout", type=float, default=0.05, help=argparse.SUPPRESS)  # the tutorial's 0.05
    args = parser.parse_args()
    if args.plain:
        plain_script(args.plain, args.steps, args.batch, args.cutoff, args.workspace, args.model_path,
                     args.lora_dropout)
        return
    from backend.models.loading import ensure_demo_model

    workspace = args.workspace or Path(tempfile.mkdtemp(prefix="bench-train-"))
    (workspace / "models").mkdir(parents=True, exist_ok=True)
    if not (workspace / "models" / "demo").exists():
        # Reuse the test suite's cached build (built there on first use).
        (workspace / "models" / "demo").symlink_to(ensure_demo_model(args.models), target_is_directory=True)
    results = {"worker": [], "plain": []}
    for rep in range(args.reps):
        order = ("worker", "plain") if rep % 2 == 0 else ("plain", "worker")
        for name in order:
            runner = run_worker if name == "worker" else run_plain
            results[name].append(runner(workspace, args.steps, args.batch, args.cutoff))
            print(name, rep, json.dumps(results[name][-1]), flush=True)
    report(results, args)


def report(results: dict, args) -> None:
    median = {name: {key: statistics.median(r[key] for r in runs) for key in ("tokens_per_second", "peak_rss_gb")}
              for name, runs in results.items()}
    print(f"\n{args.reps} repetitions x {args.steps} steps, batch {args.batch}, cutoff {args.cutoff}, LoRA r=16, demo model")
    print("| script | non-padding tokens/s (median) | peak RSS GiB (median) | runs (tokens/s) |")
    print("|---|---|---|---|")
    for name, runs in results.items():
        each = ", ".join(f"{r['tokens_per_second']:.0f}" for r in runs)
        print(f"| {name} | {median[name]['tokens_per_second']:.0f} | {median[name]['peak_rss_gb']:.2f} | {each} |")
    ratio = median["worker"]["tokens_per_second"] / median["plain"]["tokens_per_second"]
    memory = median["worker"]["peak_rss_gb"] / median["plain"]["peak_rss_gb"]
    print(f"\nthroughput ratio worker / plain: {ratio:.2f}x; peak memory ratio: {memory:.2f}x")


if __name__ == "__main__":
    main()
