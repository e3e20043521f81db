"""Does the default demo run learn? LoRA on the demo model with the plain
Hugging Face Trainer + peft, loss on assistant tokens only, then exact-match
answers to DEMO_PROMPTS for the base model and the trained adapter.

    .venv/bin/python bench/demo_learning.py [--models-dir DIR] [--lr 2e-3] [--epochs 8] ...

Prints one JSON line: loss at the start and end, wall time of training,
steps per second, and exact-match counts (base vs. trained).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import DataCollatorForSeq2Seq, Trainer, TrainerCallback, TrainingArguments  # noqa: E402

from backend.models.demo import demo_answers  # noqa: E402
from backend.models.demo_facts import DEMO_PROMPTS, build_demo_rows  # noqa: E402
from backend.models.loading import ensure_demo_model, load_model, load_tokenizer  # noqa: E402


def encode(row: dict, tokenizer, cutoff_len: int) -> dict:
    """Chat-template tokens; labels -100 everywhere but the assistant turns."""
    input_ids, labels = [], []
    messages = row["messages"]
    for index, message in enumerate(messages):
        before = tokenizer.apply_chat_template(messages[:index], tokenize=False) if index else ""
        after = tokenizer.apply_chat_template(messages[:index + 1], tokenize=False)
        ids = tokenizer(after[len(before):], add_special_tokens=False)["input_ids"]
        input_ids += ids
        labels += ids if message["role"] == "assistant" else [-100] * len(ids)
    return {"input_ids": input_ids[:cutoff_len], "labels": labels[:cutoff_len]}


class LossLog(TrainerCallback):
    def __init__(self):
        self.losses = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(round(logs["loss"], 4))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models-dir", default=None, help="where the demo model is built (default: a temp folder)")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--epochs", type=float, default=8)
    parser.add_argument("--r", type=int, default=16)
    parser.add_argument("--alpha", type=int, default=32)
    parser.add_argument("--target", default="all-linear")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--cutoff", type=int, default=256)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    scratch = tempfile.mkdtemp(prefix="demo-learning-")
    started = time.time()
    model_dir = ensure_demo_model(Path(args.models_dir or scratch))
    build_s = time.time() - started
    tokenizer = load_tokenizer(model_dir)
    model = load_model(model_dir)
    base = demo_answers(model, tokenizer, DEMO_PROMPTS)

    started = time.time()
    rows = Dataset.from_list(build_demo_rows())
    train = rows.map(lambda row: encode(row, tokenizer, args.cutoff), remove_columns=rows.column_names)
    target = args.target if args.target == "all-linear" else args.target.split(",")
    model = get_peft_model(model, LoraConfig(r=args.r, lora_alpha=args.alpha, lora_dropout=0.0,
                                             target_modules=target, task_type="CAUSAL_LM"))
    log = LossLog()
    trainer = Trainer(
        model=model,
        args=TrainingArguments(
            output_dir=str(Path(scratch) / "run"), per_device_train_batch_size=args.batch,
            num_train_epochs=args.epochs, learning_rate=args.lr, lr_scheduler_type="cosine",
            warmup_steps=0.03, logging_steps=5, save_strategy="no", report_to=[], seed=42,
            use_cpu=True, dataloader_num_workers=0, disable_tqdm=True),
        train_dataset=train,
        data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True, label_pad_token_id=-100),
        callbacks=[log],
    )
    result = trainer.train()
    train_s = time.time() - started
    trained = demo_answers(model, tokenizer, DEMO_PROMPTS)
    print(json.dumps({
        "lr": args.lr, "epochs": args.epochs, "r": args.r, "alpha": args.alpha, "target": args.target,
        "batch": args.batch, "build_s": round(build_s, 1), "train_s": round(train_s, 1),
        "steps": result.global_step, "steps_per_s": round(result.global_step / train_s, 2),
        "loss_first": log.losses[0] if log.losses else None, "loss_last": log.losses[-1] if log.losses else None,
        "base_exact": sum(ok for _, _, ok in base), "trained_exact": sum(ok for _, _, ok in trained),
        "prompts": len(DEMO_PROMPTS),
        "wrong_after": [(prompt, got) for prompt, got, ok in trained if not ok][:6],
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
