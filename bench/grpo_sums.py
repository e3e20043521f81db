"""GRPO on a task the project generates itself: small sums answered in a required format.

The starter model (SmolLM2-135M-Instruct) is asked "What is A + B?" after a system
prompt that asks for the sum inside answer tags and one worked example. The operands
run from --min-operand to --max-operand (1..10 by default: sums the base already gets
right a third of the time, so exact_match has something to reward; 10..99 is the
two-digit task, where the base is almost never right and exact_match gives no signal).
The held-out sums are drawn first; the training prompts use the other operand pairs
only (repeated where the range has fewer pairs than prompts).

The real worker (`python -m backend.train --set stage=grpo ...`) trains a LoRA adapter
rewarded by exact_match (the sum, weight --exact-weight, 1.0) and format (the whole
answer `<answer>N</answer>`, weight --format-weight, 0.5: the format alone cannot
reach the reward's top). Before and after, greedy answers to the held-out sums are
scored with the same reward functions: the mean weighted reward (0..1.5 by default),
the share correct and the share in the format, for the base and each checkpoint.

    python bench/grpo_sums.py --workspace /tmp/grpo-bench [--minutes 15] [--steps 300] [--set key=value ...]
    python bench/grpo_sums.py --workspace WS --base-only                     # score the base model only
    python bench/grpo_sums.py --workspace WS --min-operand 10 --max-operand 99 --format-weight 1   # two-digit task
    python bench/grpo_sums.py --workspace WS --eval-only RUN_DIR   # score a finished run's checkpoints

The training stops at --steps or after --minutes of wall time (a Stop, which
saves a checkpoint), whichever comes first. It prints a JSON summary and a
Markdown table (docs/PREFERENCE.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)

SYSTEM = "You add two numbers. Reply with the sum only, inside answer tags."
# One worked example before each question: the format is shown once, the model has to keep to it.
EXAMPLE = [{"role": "user", "content": "What is 12 + 30?"}, {"role": "assistant", "content": "<answer>42</answer>"}]
PATTERN = r"<answer>\s*\d+\s*</answer>"
MODEL = "smollm2-135m-instruct"
# LoRA at a high learning rate, 1 prompt x 8 completions of at most 12 tokens a step, no KL term (beta 0:
# no reference pass): a step costs seconds of CPU, so a 15-minute run on a shared machine takes tens of steps.
SETTINGS = ["num_generations=8", "per_device_train_batch_size=8", "max_completion_length=12", "temperature=1.0",
            "learning_rate=5e-4", "lr_scheduler_type=constant", "warmup_ratio=0", "beta=0", "cutoff_len=128",
            "logging_steps=1", "save_steps=5", "save_total_limit=2"]


def sums(count: int, seed: int, low: int, high: int, exclude: set | None = None) -> list[tuple[int, int]]:
    """`count` pairs of operands in low..high, none in `exclude`; distinct while there are enough, then repeated."""
    rng, seen = random.Random(seed), set(exclude or ())
    pool = [(a, b) for a in range(low, high + 1) for b in range(low, high + 1) if (a, b) not in seen]
    if not pool:
        raise SystemExit(f"no operand pairs left in {low}..{high} beside the {len(seen)} excluded")
    rng.shuffle(pool)
    return [pool[i % len(pool)] for i in range(count)]


def write_task(folder: Path, train: int, held_out: int, low: int, high: int) -> tuple[Path, list[dict]]:
    """The training prompts (chat rows whose last assistant turn, the sum, is the reference) and the held-out rows.

    The held-out pairs are drawn first, distinct; the training prompts come from the other pairs (repeated where
    the range has fewer pairs than prompts), so no held-out sum is ever trained on."""
    folder.mkdir(parents=True, exist_ok=True)
    pairs = (high - low + 1) ** 2
    if held_out >= pairs:
        raise SystemExit(f"{held_out} held-out sums need more than the {pairs} operand pairs of {low}..{high}")
    test_pairs = sums(held_out, seed=2, low=low, high=high)
    train_pairs = sums(train, seed=1, low=low, high=high, exclude=set(test_pairs))
    rows = [{"messages": [*question(a, b), {"role": "assistant", "content": str(a + b)}]} for a, b in train_pairs]
    path = folder / "sums_train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    tests = [{"prompt": question(a, b), "answer": str(a + b)} for a, b in test_pairs]
    return path, tests


def question(a: int, b: int) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, *EXAMPLE, {"role": "user", "content": f"What is {a} + {b}?"}]


def score(model_dir: Path, adapter: Path | None, tests: list[dict], pattern: str, max_tokens: int,
          weights: tuple[float, float] = (1.0, 1.0)) -> dict:
    """Greedy answers to the held-out prompts, scored by the run's own reward functions."""
    import torch
    from transformers import AutoModelForCausalLM

    from backend.models.greedy import greedy_answers
    from backend.models.loading import load_tokenizer
    from backend.training.rewards import build_preset
    from backend.training.threads import limit_threads

    limit_threads()  # one thread on a busy machine: spinning OpenMP threads of several processes slow each other
    torch.manual_seed(0)
    tokenizer = load_tokenizer(str(adapter or model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    model.eval()
    prompts = [t["prompt"] for t in tests]
    with torch.no_grad():
        answers = greedy_answers(model, tokenizer, prompts, max_new_tokens=max_tokens, batch_size=16)
    exact = build_preset({"kind": "exact_match"}, "exact_match", len)
    fmt = build_preset({"kind": "format", "pattern": pattern}, "format", len)
    references = [t["answer"] for t in tests]
    e = exact(prompts, answers, answer=references)
    f = fmt(prompts, answers)
    n = len(tests)
    return {"mean_reward": round((weights[0] * sum(e) + weights[1] * sum(f)) / n, 4), "exact_share": round(sum(e) / n, 4),
            "format_share": round(sum(f) / n, 4), "samples": answers[:3]}


def train(workspace: Path, data: Path, sets: list[str], steps: int, minutes: float,
          weights: tuple[float, float] = (1.0, 1.0)) -> tuple[Path, float]:
    run_dir = workspace / "runs" / time.strftime("grpo-sums-%H%M%S")
    command = [sys.executable, "-m", "backend.train", "--workspace", str(workspace), "--run-dir", str(run_dir),
               "--set", f"model_name_or_path={MODEL}", "--set", "stage=grpo", "--set", f"dataset={data}",
               "--set", "val_size=0", "--set", "replay=off", "--set", f"max_steps={steps}",
               "--set", f"rewards=[{{kind: exact_match, weight: {weights[0]}}}, "
               f"{{kind: format, weight: {weights[1]}, pattern: '{PATTERN}'}}]"]
    for item in [*SETTINGS, *sets]:
        command += ["--set", item]
    print(" ".join(command), file=sys.stderr, flush=True)
    started = time.monotonic()
    with open(workspace / "train-stdout.log", "w") as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        deadline = started + minutes * 60
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(2)
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # the worker's graceful stop: saves a checkpoint, then ends
        process.wait()
    return run_dir, time.monotonic() - started


def checkpoints(run_dir: Path) -> list[Path]:
    found = sorted((p for p in run_dir.glob("checkpoint-*") if (p / "adapter_config.json").is_file()),
                   key=lambda p: int(p.name.split("-")[1]))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--minutes", type=float, default=15.0, help="wall-time budget of the training")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--train-prompts", type=int, default=200)
    parser.add_argument("--held-out", type=int, default=50)
    parser.add_argument("--min-operand", type=int, default=1, help="smallest operand (two-digit task: 10)")
    parser.add_argument("--max-operand", type=int, default=10, help="largest operand (two-digit task: 99)")
    parser.add_argument("--exact-weight", type=float, default=1.0, help="exact_match's weight")
    parser.add_argument("--format-weight", type=float, default=0.5, help="format's weight")
    parser.add_argument("--max-tokens", type=int, default=16, help="greedy answer length when scoring")
    parser.add_argument("--set", action="append", default=[], help="extra --set for the worker")
    parser.add_argument("--all-checkpoints", action="store_true", help="score every checkpoint (default: the last)")
    parser.add_argument("--base-only", action="store_true", help="score the base model only")
    parser.add_argument("--no-base", action="store_true", help="skip the base model's score")
    parser.add_argument("--eval-only", type=Path, default=None, help="score this run's checkpoints, train nothing")
    args = parser.parse_args()

    from backend.models.offline import ensure_offline_model

    workspace = args.workspace.resolve()
    (workspace / "runs").mkdir(parents=True, exist_ok=True)
    cached = user_cache_dir() / "test-models" / MODEL  # the test suite's converted copy, when there is one
    if cached.is_dir() and not (workspace / "models" / MODEL).exists():
        (workspace / "models").mkdir(parents=True, exist_ok=True)
        (workspace / "models" / MODEL).symlink_to(cached, target_is_directory=True)
    model_dir = ensure_offline_model(MODEL, workspace / "models")
    data, tests = write_task(workspace / "task", args.train_prompts, args.held_out, args.min_operand, args.max_operand)
    weights = (args.exact_weight, args.format_weight)
    load_before = os.getloadavg()
    result = {"held_out": len(tests), "operands": [args.min_operand, args.max_operand], "weights": list(weights),
              "load_before": [round(x, 2) for x in load_before]}
    if not args.no_base:
        result["base"] = score(model_dir, None, tests, PATTERN, args.max_tokens, weights)
        print(json.dumps({"base": result["base"]}), file=sys.stderr, flush=True)
    if args.base_only:
        print(json.dumps(result, indent=1))
        return 0
    if args.eval_only:
        run_dir, wall = args.eval_only, None
    else:
        run_dir, wall = train(workspace, data, args.set, args.steps, args.minutes, weights)
    result.update(run=str(run_dir), train_wall_s=round(wall, 1) if wall else None,
                  load_after=[round(x, 2) for x in os.getloadavg()])
    status = json.loads((run_dir / "status.json").read_text()) if (run_dir / "status.json").is_file() else {}
    result["state"], result["global_step"] = status.get("state"), status.get("global_step")
    for checkpoint in checkpoints(run_dir)[-1:] if not args.all_checkpoints else checkpoints(run_dir):
        result[checkpoint.name] = score(model_dir, checkpoint, tests, PATTERN, args.max_tokens, weights)
        print(json.dumps({checkpoint.name: result[checkpoint.name]}), file=sys.stderr, flush=True)
    print(json.dumps(result, indent=1))
    top = f"{sum(weights):g}"
    print(f"\n| model | mean reward (0-{top}) | correct sum | in the format |\n|---|---|---|---|")
    for name, row in result.items():
        if isinstance(row, dict) and "mean_reward" in row:
            print(f"| {name} | {row['mean_reward']:.2f} | {row['exact_share']:.0%} | {row['format_share']:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
