"""Builds the offline demo model: a small Qwen2 with its own byte-level BPE
tokenizer and a ChatML chat template, briefly pre-trained on the plain-text
facts of the demo dataset, saved in Hugging Face format.

Why pre-train: LoRA on a randomly initialised model barely learns (issue 2
measured 1 of 18 prompts). A base that already *knows* the facts as plain
sentences gives LoRA a real job it can do in minutes: learn to answer a chat
question with the right sentence and stop.

Deterministic: fixed seeds, a fixed thread count and no dropout, so two
builds on one machine write byte-identical files.
"""

from __future__ import annotations

import contextlib
import math
import random
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from backend.demo_data import build_demo_rows, build_pretraining_corpus

# Bump whenever anything below changes the built files: old builds are rebuilt.
DEMO_MODEL_VERSION = "1"

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]
VOCAB_SIZE = 3072
# CJK ideographs and full-width punctuation.
CJK_PATTERN = "[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]"
CONTEXT_LENGTH = 512

# ChatML, as Qwen2 uses it. The {% generation %} block marks the assistant
# tokens, so `apply_chat_template(..., return_assistant_tokens_mask=True)` works.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{%- generation %}{{- message['content'] + '<|im_end|>' }}{%- endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Pre-training schedule, measured on 2 busy CPU cores (see docs/DEMO.md).
PRETRAIN_STEPS = 300
PRETRAIN_BATCH = 8  # sequences per step
PRETRAIN_BLOCK = 64  # tokens per sequence
PRETRAIN_LR = 3e-3
# One thread: the float results do not depend on the core count, and on a
# shared machine one thread loses little.
BUILD_THREADS = 1


def build_demo_model(folder: Path, seed: int = 0) -> None:
    """Build the demo model into `folder` (which must be empty or absent)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with _fixed_threads(BUILD_THREADS):
        statements = build_pretraining_corpus()
        tokenizer = train_tokenizer(statements + _chat_texts())
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(_model_config(tokenizer))
        pretrain(model, tokenizer, statements, seed=seed)
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
        hidden_size=192,
        intermediate_size=512,
        num_hidden_layers=4,
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


def _batches(tokenizer, statements: list[str], seed: int):
    """Endless (PRETRAIN_BATCH, PRETRAIN_BLOCK) batches of the statements, each
    pass in a new random order, packed back to back with a space between."""
    encoded = [tokenizer(text + " ", add_special_tokens=False)["input_ids"] for text in statements]
    rng = random.Random(seed)
    buffer: list[int] = []
    need = PRETRAIN_BATCH * PRETRAIN_BLOCK
    while True:
        while len(buffer) < need:
            for index in rng.sample(range(len(encoded)), len(encoded)):
                buffer += encoded[index]
        yield torch.tensor(buffer[:need]).view(PRETRAIN_BATCH, PRETRAIN_BLOCK)
        buffer = buffer[need:]


def pretrain(model: Qwen2ForCausalLM, tokenizer, statements: list[str], seed: int) -> list[float]:
    """Plain next-token training (full weights, AdamW); returns the losses."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=PRETRAIN_LR, weight_decay=0.0)
    losses = []
    model.train()
    for step, batch in zip(range(PRETRAIN_STEPS), _batches(tokenizer, statements, seed)):
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    model.eval()
    return losses


def _lr_at(step: int) -> float:
    """Linear warm-up over 5% of the steps, then cosine decay to 10%."""
    warmup = max(1, PRETRAIN_STEPS // 20)
    if step < warmup:
        return PRETRAIN_LR * (step + 1) / warmup
    progress = (step - warmup) / max(1, PRETRAIN_STEPS - warmup)
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
