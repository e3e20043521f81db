"""Greedy, batched answers to conversations: the one generation loop of replay (the base's own
answers, backend/training/replay.py), the held-out scores (backend/evaluation/heldout.py),
evaluation (answers scored against references) and export (merged model checked against the
adapter). It sits with the models, below both training and evaluation."""

from __future__ import annotations

import contextlib

from backend.models.chat_templates import render, stop_token_ids


def prompt_and_reference(messages: list[dict]) -> tuple[list[dict], str]:
    """Split a conversation before its last assistant turn: (prompt messages, reference answer)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "assistant":
            return messages[:i], messages[i]["content"]
    return messages, ""


def greedy_answers(model, tokenizer, prompts: list[list[dict]], max_new_tokens: int = 64, batch_size: int = 8,
                   max_prompt_tokens: int | None = None, on_batch=None) -> list[str]:
    """Greedy answers to each prompt (a list of messages), generated in batches.

    Left padding, so every prompt in a batch ends where generation starts.
    `max_prompt_tokens` keeps the last tokens of a too-long prompt (the part
    next to the answer). `on_batch(done)` is called after each batch."""
    ids = greedy_token_ids(model, tokenizer, prompts, max_new_tokens, batch_size, max_prompt_tokens, on_batch)
    return [tokenizer.decode(answer, skip_special_tokens=True).strip() for answer in ids]


def greedy_answers_ended(model, tokenizer, prompts: list[list[dict]], max_new_tokens: int = 64, batch_size: int = 8,
                         max_prompt_tokens: int | None = None, on_batch=None) -> list[tuple[str, bool]]:
    """(answer text, whether it ended on a stop token) per prompt: an answer that did not end
    ran to max_new_tokens, which a model that lost its end of turn does."""
    finished = greedy_finished(model, tokenizer, prompts, max_new_tokens, batch_size, max_prompt_tokens, on_batch)
    return [(tokenizer.decode(ids, skip_special_tokens=True).strip(), ended) for ids, ended in finished]


def greedy_token_ids(model, tokenizer, prompts: list[list[dict]], max_new_tokens: int = 64, batch_size: int = 8,
                     max_prompt_tokens: int | None = None, on_batch=None) -> list[list[int]]:
    """The token ids of each greedy answer, up to (not including) its first stop token."""
    return [ids for ids, _ in greedy_finished(model, tokenizer, prompts, max_new_tokens, batch_size,
                                              max_prompt_tokens, on_batch)]


def greedy_finished(model, tokenizer, prompts: list[list[dict]], max_new_tokens: int = 64, batch_size: int = 8,
                    max_prompt_tokens: int | None = None, on_batch=None) -> list[tuple[list[int], bool]]:
    """(token ids before the first stop token, whether a stop token came) per greedy answer."""
    import torch

    sides = tokenizer.padding_side, tokenizer.truncation_side
    tokenizer.padding_side = tokenizer.truncation_side = "left"
    answers: list[tuple[list[int], bool]] = []
    device = next(model.parameters()).device
    stops = stop_token_ids(tokenizer, getattr(model, "generation_config", None))
    try:
        for start in range(0, len(prompts), batch_size):
            texts = [render(tokenizer, p, add_generation_prompt=True) for p in prompts[start:start + batch_size]]
            batch = tokenizer(texts, add_special_tokens=False, padding=True, return_tensors="pt",
                              truncation=bool(max_prompt_tokens), max_length=max_prompt_tokens)
            batch = {k: v.to(device) for k, v in batch.items()}
            with torch.no_grad():
                output = model.generate(**batch, do_sample=False, max_new_tokens=max_new_tokens,
                                        pad_token_id=tokenizer.pad_token_id, eos_token_id=stops)
            for row in output[:, batch["input_ids"].shape[1]:].tolist():
                ids = until_stop(row, stops)
                answers.append((ids, len(ids) < len(row)))  # a stop token came before the row ran out
            if on_batch:
                on_batch(len(answers))
    finally:
        tokenizer.padding_side, tokenizer.truncation_side = sides
    return answers


def until_stop(ids: list[int], stops) -> list[int]:
    """The ids before the first stop token (a finished row of a batch is padded with stop / pad tokens)."""
    for i, token in enumerate(ids):
        if token in stops:
            return ids[:i]
    return ids


@contextlib.contextmanager
def training_layout_kept(model):
    """Generate with a model that goes on training: bitsandbytes repacks a 4-bit layer's weight
    for its CPU inference kernel on the first forward in eval mode without grad, for good, and
    the training forward after it then fails ("a view of a leaf Variable that requires grad is
    being used in an in-place operation"; docs/LIBRARY_TRAPS.md). The repacking is switched off
    meanwhile (`support_avx512bf16_for_cpu`, the flag bitsandbytes checks first)."""
    layers = [m for m in model.modules() if getattr(m, "support_avx512bf16_for_cpu", False)]
    for layer in layers:
        layer.support_avx512bf16_for_cpu = False
    try:
        yield model
    finally:
        for layer in layers:
            layer.support_avx512bf16_for_cpu = True
