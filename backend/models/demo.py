"""Builds the offline demo model: a small Qwen2 with its own byte-level BPE
tokenizer and a ChatML chat template, briefly pre-trained on the plain-text
facts of the demo dataset, saved in Hugging Face format.

Why pre-train: LoRA on a randomly initialised model barely learns (it
answered 1 of 18 prompts after 300 steps: docs/DEMO.md). A base that already *knows* the facts as plain
sentences gives LoRA a real job it can do in minutes: learn to answer a chat
question with the right sentence and stop.

Deterministic: fixed seeds, a fixed thread count and no dropout, so two
builds on one machine write byte-identical files.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Callable
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from backend.models.chat_templates import CHATML
from backend.models.demo_facts import DEMO_MODEL_VERSION, build_demo_rows, build_pretraining_corpus  # noqa: F401

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]
VOCAB_SIZE = 3072
# CJK ideographs and full-width punctuation.
CJK_PATTERN = "[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]"
CONTEXT_LENGTH = 512

# ChatML, as Qwen2 uses it, with {% generation %} markers (`return_assistant_tokens_mask=True` works):
# the same template a base model can be given (backend/models/chat_templates.py).
CHAT_TEMPLATE = CHATML

# Pre-training schedule, measured on 2 busy CPU cores (see docs/DEMO.md).
PRETRAIN_EPOCHS = 28
PRETRAIN_BATCH = 16  # texts per step
PRETRAIN_LR = 3e-3
# One thread: the float results do not depend on the core count, and on a
# shared machine one thread loses little.
BUILD_THREADS = 1


def build_demo_model(folder: Path, seed: int = 0, pretrain_epochs: int = PRETRAIN_EPOCHS,
                     progress: Callable[[int, int], None] | None = None) -> None:
    """Build the demo model into `folder` (which must be empty or absent).

    A smaller `pretrain_epochs` shortens the build (tests of the build itself).
    `progress(step, steps)` is called after each pre-training step (the build's
    only long part: about two minutes on two CPU cores).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with _fixed_threads(BUILD_THREADS):
        corpus = build_pretraining_corpus()
        tokenizer = train_tokenizer([context + text for context, text in corpus] + _chat_texts())
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(_model_config(tokenizer))
        pretrain(model, tokenizer, corpus, seed=seed, epochs=pretrain_epochs, progress=progress)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
        max_new_tokens=64,
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _chat_texts() -> list[str]:
    """The demo rows as raw text, so the tokenizer has merges for their words."""
    return [m["content"] for row in build_demo_rows() for m in row["messages"]]


def train_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """A byte-level BPE (GPT-2 / Qwen style): any UTF-8 text, Chinese included."""
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence([
        # One Chinese character per piece: on this small corpus BPE would
        # otherwise merge whole Chinese sentences into single tokens.
        pre_tokenizers.Split(Regex(CJK_PATTERN), behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        model_max_length=CONTEXT_LENGTH,
        padding_side="right",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _model_config(tokenizer: PreTrainedTokenizerFast) -> Qwen2Config:
    # Sized so the Trainer runs several steps per second on 2 CPU cores.
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=256,
        intermediate_size=1024,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=CONTEXT_LENGTH,
        tie_word_embeddings=True,
        attention_dropout=0.0,
        rope_theta=10000.0,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.pad_token_id,
        architectures=["Qwen2ForCausalLM"],
    )


def _encode_corpus(tokenizer, corpus: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """(input ids, labels): loss on the continuation only.

    No end-of-text token is trained after a text: the base model must not
    learn to stop after an answer, so that stopping (<|im_end|>) is one of
    the things the demo fine-tuning visibly teaches."""
    items = []
    for context, continuation in corpus:
        head = tokenizer(context, add_special_tokens=False)["input_ids"] if context else []
        tail = tokenizer(continuation, add_special_tokens=False)["input_ids"]
        items.append((head + tail, [-100] * len(head) + tail))
    return items


def _batch(items: list[tuple[list[int], list[int]]], pad_id: int) -> dict:
    width = max(len(ids) for ids, _ in items)
    input_ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    labels = torch.full((len(items), width), -100, dtype=torch.long)
    attention_mask = torch.zeros((len(items), width), dtype=torch.long)
    for row, (ids, target) in enumerate(items):
        input_ids[row, :len(ids)] = torch.tensor(ids)
        labels[row, :len(ids)] = torch.tensor(target)
        attention_mask[row, :len(ids)] = 1
    return {"input_ids": input_ids, "labels": labels, "attention_mask": attention_mask}


def pretrain(model: Qwen2ForCausalLM, tokenizer, corpus: list[tuple[str, str]], seed: int,
             epochs: int = PRETRAIN_EPOCHS, progress: Callable[[int, int], None] | None = None) -> list[float]:
    """Full-weight training on the plain-text corpus (AdamW); returns the losses."""
    items = _encode_corpus(tokenizer, corpus)
    rng = random.Random(seed)
    steps = epochs * math.ceil(len(items) / PRETRAIN_BATCH)
    optimizer = torch.optim.AdamW(model.parameters(), lr=PRETRAIN_LR, weight_decay=0.0)
    losses: list[float] = []
    model.train()
    for _ in range(epochs):
        order = rng.sample(range(len(items)), len(items))
        for start in range(0, len(order), PRETRAIN_BATCH):
            for group in optimizer.param_groups:
                group["lr"] = _lr_at(len(losses), steps)
            batch = _batch([items[i] for i in order[start:start + PRETRAIN_BATCH]], tokenizer.pad_token_id)
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            if progress:
                progress(len(losses), steps)
    model.eval()
    return losses


def _lr_at(step: int, steps: int) -> float:
    """Linear warm-up over 5% of the steps, then cosine decay to 10%."""
    warmup = max(1, steps // 20)
    if step < warmup:
        return PRETRAIN_LR * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return PRETRAIN_LR * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


@contextlib.contextmanager
def _fixed_threads(count: int):
    # Float sums depend on how work is split across threads: fix the split.
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@torch.no_grad()
def demo_answers(model, tokenizer, prompts, max_new_tokens: int = 48) -> list[tuple[str, str, bool]]:
    """(prompt, generated answer, exact match) for each (prompt, expected) pair.

    Greedy decoding through the chat template. Exact means the model stopped
    on its own (end-of-turn token) and the text equals the expected answer.
    """
    results = []
    was_training = model.training
    model.eval()
    for prompt, expected in prompts:
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                             add_generation_prompt=True)
        inputs = tokenizer(text, add_special_tokens=False, return_tensors="pt").to(model.device)
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                                eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        new = output[0, inputs["input_ids"].shape[1]:].tolist()
        stopped = bool(new) and new[-1] == tokenizer.eos_token_id
        answer = tokenizer.decode(new, skip_special_tokens=True).strip()
        results.append((prompt, answer, stopped and answer == expected))
    model.train(was_training)
    return results
