"""Does a base model trained through a chosen chat template learn to stop?

A short LoRA SFT of a model without a chat template of its own (gemma-3-270m,
the offline base) through the real worker (`python -m backend.train`,
chat_template auto -> Gemma's template, `<end_of_turn>` as the EOS), then
greedy answers to held-out prompts that are NOT in the training rows: how
many end with an EOS before max_new_tokens, for the base (same template,
adapter off) and the trained adapter. Generation stops on
backend.models.chat_templates.stop_token_ids (the rule Chat, Evaluate and the
API server use); the answers that ended on the template's EOS rather than the
base's own <eos> are counted apart (they are the ones that ran to the limit
when only generation_config.json's id stopped generation).

    OMP_NUM_THREADS=1 .venv/bin/python bench/base_template_eos.py [--model gemma-3-270m] [--workspace DIR]

Training rows: the demo fact rows (backend/models/demo_facts.py), held-out: other
demo prompts plus GENERAL below (written here, in no training row). Prints
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# Held-out questions of other kinds than the demo facts: none is in a training row.
GENERAL = [
    "Name a primary colour.", "What do bees make?", "What is the opposite of cold?", "How many days are in a week?",
    "What animal says moo?", "What is frozen water called?", "Which planet do we live on?",
    "What do you call a baby cat?", "What is the first letter of the English alphabet?", "What is 10 minus 3?",
    "Say hello in French.", "What shape has three sides?", "What gas do people breathe in to live?",
    "Which season comes after winter?", "What colour are most leaves in summer?", "How many hours are in a day?",
    "天空是什么颜色的？", "一年有几个月？", "狗会怎么叫？", "三加四等于多少？",
]


def rows_split(train_rows: int, held_out: int, seed: int) -> tuple[list[dict], list[str]]:
    from backend.models.demo_facts import build_demo_rows

    by_prompt = {}
    for row in build_demo_rows():
        by_prompt.setdefault(row["messages"][0]["content"], row)
    prompts = sorted(by_prompt)
    random.Random(seed).shuffle(prompts)
    train = [by_prompt[p] for p in prompts[:train_rows]]
    held = prompts[train_rows:train_rows + held_out]
    assert not set(held) & {r["messages"][0]["content"] for r in train}
    return train, held + GENERAL


def train(args, rows: list[dict], run_dir: Path) -> float:
    data = run_dir.parent / "rows.json"
    data.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    sets = {"model_name_or_path": args.model, "dataset": str(data), "chat_template": args.chat_template,
            "method": "lora", "lora_r": 16, "lora_alpha": 32, "learning_rate": args.lr,
            "num_train_epochs": args.epochs, "per_device_train_batch_size": 8, "cutoff_len": 64, "val_size": 0,
            "save_steps": 10_000, "seed": args.seed, "replay": "off"}
    command = [sys.executable, "-m", "backend.train", "--workspace", str(args.workspace), "--run-dir", str(run_dir),
               *[a for key, value in sets.items() for a in ("--set", f"{key}={json.dumps(value)}")]]
    started = time.time()
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"training failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return time.time() - started


def answers(model, tokenizer, prompts: list[str], max_new_tokens: int, stops: list[int]) -> list[dict]:
    """Greedy answers, left-padded batches; per answer: text, tokens and the stop id it ended on."""
    import torch

    from backend.models.chat_templates import render

    tokenizer.padding_side = "left"
    out = []
    for start in range(0, len(prompts), 8):
        texts = [render(tokenizer, [{"role": "user", "content": p}], add_generation_prompt=True)
                 for p in prompts[start:start + 8]]
        batch = tokenizer(texts, add_special_tokens=False, padding=True, return_tensors="pt")
        with torch.no_grad():
            generated = model.generate(**batch, do_sample=False, max_new_tokens=max_new_tokens,
                                       eos_token_id=stops, pad_token_id=tokenizer.pad_token_id)
        for row in generated[:, batch["input_ids"].shape[1]:].tolist():
            ended = next((i for i, t in enumerate(row) if t in stops), None)
            new = row[:ended + 1] if ended is not None else row
            out.append({"text": tokenizer.decode(new, skip_special_tokens=True).strip(), "tokens": len(new),
                        "stop_id": new[-1] if ended is not None else None})
    return out


def score(results: list[dict], template_eos: int) -> dict:
    stopped = [r for r in results if r["stop_id"] is not None]
    return {"ended_with_eos": len(stopped), "of": len(results), "share": round(len(stopped) / len(results), 3),
            "ended_on_template_eos": sum(r["stop_id"] == template_eos for r in stopped),
            "mean_tokens": round(sum(r["tokens"] for r in results) / len(results), 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gemma-3-270m", help="offline name, folder or GGUF file of a base model")
    parser.add_argument("--workspace", type=Path, default=None, help="workspace whose models/ holds the model")
    parser.add_argument("--chat-template", default="auto")
    parser.add_argument("--train-rows", type=int, default=96)
    parser.add_argument("--held-out", type=int, default=40, help="demo prompts held out (plus the general ones)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.workspace = (args.workspace or Path(tempfile.mkdtemp(prefix="base-eos-"))).resolve()
    rows, held_out = rows_split(args.train_rows, args.held_out, args.seed)
    run_dir = args.workspace / "runs" / "base-template-eos"
    seconds = train(args, rows, run_dir)

    from peft import PeftModel

    from backend.models.chat_templates import apply_for_model, fit_model, stop_token_ids
    from backend.models.loading import load_model, load_tokenizer, resolve_model_path

    path = resolve_model_path(args.model, args.workspace / "models")
    tokenizer = load_tokenizer(path)
    plan = apply_for_model(tokenizer, args.chat_template, path)  # as Chat and Evaluate load a run's base
    base = load_model(path).eval()
    base_gen_ids = stop_token_ids(None, base.generation_config)  # what generation_config.json alone says
    fit_model(base, plan, tokenizer)
    stops = stop_token_ids(tokenizer, base.generation_config)
    before = answers(base, tokenizer, held_out, args.max_new_tokens, stops)
    model = PeftModel.from_pretrained(base, str(run_dir / "final")).eval()
    after = answers(model, tokenizer, held_out, args.max_new_tokens, stops)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    print(json.dumps({
        "model": args.model, "template": plan.as_dict(), "stop_ids": stops, "generation_config_ids": base_gen_ids,
        "train_rows": len(rows), "held_out": len(held_out), "steps": summary.get("global_step"),
        "train_seconds": round(seconds, 1), "max_new_tokens": args.max_new_tokens,
        "base": score(before, plan.eos_id), "trained": score(after, plan.eos_id),
        "examples": [{"prompt": p, "base": b["text"][:60], "trained": a["text"][:60]}
                     for p, b, a in list(zip(held_out, before, after))[::12]],
        "not_stopped": [p for p, a in zip(held_out, after) if a["stop_id"] is None],
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
