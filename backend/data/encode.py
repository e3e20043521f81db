"""Canonical rows -> training tokens, through the tokenizer's own chat template.

This is the one code path that turns a conversation into `input_ids` and
`labels`: the trainer, the evaluator and the data checks (token lengths,
over-cutoff rows) all call it, so a length shown in the Data tab is the length
the trainer sees.

How the loss mask is found: the whole conversation is rendered to one string
with `apply_chat_template(tokenize=False)`. For every assistant turn i, the
rendering of `messages[:i]` with `add_generation_prompt=True` ends where the
assistant's content starts, and the rendering of `messages[:i+1]` ends after
its end-of-turn marker. That character span is trainable; the role header
(part of the generation prompt) is not. The full string is tokenised once with
offsets and every token overlapping a span is labelled. Templates that are not
prefix-stable (a rendering of the prefix is not a prefix of the full string,
e.g. templates that drop earlier reasoning) fall back to locating the assistant
content by search, so the content itself is still the trainable part.

The rendered string already holds the template's BOS (if the template writes
one), so it is tokenised with `add_special_tokens=False`: no second BOS.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from backend.models.chat_templates import render

IGNORE_INDEX = -100


@dataclass
class EncodedRow:
    input_ids: list[int]
    labels: list[int]  # -100 on every token that is not trained on
    length: int  # tokens of the full templated conversation before truncation
    truncated: bool  # True if cut to cutoff_len
    response_cut: bool  # True if cutting removed every trainable token


def assistant_spans(tokenizer, messages: list[dict], full: str, tools: list | None = None) -> list[tuple[int, int]]:
    """Character spans [start, end) of every assistant turn in `full`, end-of-turn marker included
    (and the whitespace after it not)."""
    spans: list[tuple[int, int]] = []
    search_from = 0
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = render(tokenizer, messages[:i], tools, add_generation_prompt=True) if i else ""
        through = render(tokenizer, messages[: i + 1], tools)
        if i and full.startswith(before) and full.startswith(through) and len(through) > len(before):
            # The whitespace a template writes after the end-of-turn marker ('<|im_end|>\n') is the
            # next turn's layout, never generated: not trained, as {% generation %} marks it.
            spans.append((len(before), len(before) + len(through[len(before):].rstrip())))
        else:
            spans.append(_search_span(full, message["content"], search_from))
        search_from = spans[-1][1]
    return [s for s in spans if s[1] > s[0]]


def _search_span(full: str, content: str, start: int) -> tuple[int, int]:
    """Fallback for templates that are not prefix-stable: the content's own characters."""
    at = full.find(content, start) if content else -1
    return (at, at + len(content)) if at >= 0 else (start, start)


def _mask_from_offsets(offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[bool]:
    """True for each token whose characters overlap an assistant span (both lists sorted)."""
    mask = []
    k = 0
    for start, end in offsets:
        while k < len(spans) and spans[k][1] <= start:
            k += 1
        inside = k < len(spans) and start < spans[k][1] and max(end, start + 1) > spans[k][0]
        mask.append(inside)
    return mask


def _tokenise_with_mask(tokenizer, full: str, spans: list[tuple[int, int]]) -> tuple[list[int], list[bool]]:
    if getattr(tokenizer, "is_fast", False):
        enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return list(enc["input_ids"]), _mask_from_offsets(enc["offset_mapping"], spans)
    # Slow tokenizers have no offsets: tokenise the pieces between span edges separately.
    ids: list[int] = []
    mask: list[bool] = []
    edges = sorted({0, len(full), *[e for s in spans for e in s]})
    for a, b in itertools.pairwise(edges):
        piece = tokenizer(full[a:b], add_special_tokens=False, verbose=False)["input_ids"]
        trainable = any(s <= a and b <= e for s, e in spans)
        ids.extend(piece)
        mask.extend([trainable] * len(piece))
    return ids, mask


def encode_messages(
    tokenizer, messages: list[dict], cutoff_len: int, train_on_prompt: bool = False, tools: list | None = None
) -> EncodedRow:
    """Tokens and labels of one conversation, cut to `cutoff_len` tokens.

    Labels are -100 everywhere except on assistant turns (each one in a
    multi-turn conversation), or nowhere when `train_on_prompt`.
    """
    full = render(tokenizer, messages, tools)
    spans = assistant_spans(tokenizer, messages, full, tools)
    ids, mask = _tokenise_with_mask(tokenizer, full, spans)
    length = len(ids)
    truncated = cutoff_len > 0 and length > cutoff_len
    if truncated:
        ids, mask = ids[:cutoff_len], mask[:cutoff_len]
    labels = list(ids) if train_on_prompt else [t if m else IGNORE_INDEX for t, m in zip(ids, mask)]
    # "Cut away" is about the response tokens, whatever the prompt setting.
    response_cut = truncated and not any(mask)
    return EncodedRow(input_ids=ids, labels=labels, length=length, truncated=truncated, response_cut=response_cut)


def first_prompt(messages: list[dict]) -> list[dict]:
    """The messages before the first assistant turn (rendered with the generation prompt,
    their token count is where the first trainable token starts)."""
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            return messages[:i]
    return messages


def count_tokens(tokenizer, rows: list[dict], batch_size: int = 1000) -> list[int]:
    """Token length of each canonical row's full templated conversation.

    Same rendering and tokenisation as `encode_messages` (its `length`), but
    batched: the fast tokenizer encodes `batch_size` strings per call. A row
    may carry "add_generation_prompt": True to count a prompt instead.
    """
    lengths: list[int] = []
    for start in range(0, len(rows), batch_size):
        texts = [
            render(tokenizer, r["messages"], r.get("tools"), add_generation_prompt=r.get("add_generation_prompt", False))
            for r in rows[start : start + batch_size]
        ]
        enc = tokenizer(texts, add_special_tokens=False, return_attention_mask=False, verbose=False)
        lengths.extend(len(ids) for ids in enc["input_ids"])
    return lengths
