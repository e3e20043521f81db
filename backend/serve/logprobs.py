"""Log-probabilities of tokens under a model, for the API server's `logprobs`
and `echo`: the log-softmax of the model's raw logits in float32, before any
temperature, top-p, top-k or repetition penalty (the model's own
distribution, which is what OpenAI returns and what lm-eval sums).

Scoring runs one forward pass per chunk of sequences: right-padded, so a
causal model's real tokens never attend to the padding after them, and the
chunk sized so that its logits stay within LOGITS_BUDGET bytes. No HTTP here."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
from transformers import StoppingCriteriaList

from backend.chat.generation import GenerationSettings, _EventStop, _TextStop, generation_config_for

# Bytes of float32 logits one forward chunk may hold (rows x tokens x vocabulary x 4): a batch of
# lm-eval prompts on a 50k-token vocabulary would otherwise take gigabytes at once.
LOGITS_BUDGET = 256 * 2**20


@dataclass
class Scores:
    """One sequence's tokens from `start` on, each with its log-probability given the tokens before
    it (None for the sequence's first token: nothing comes before it) and its most likely tokens."""
    ids: list[int]
    logprobs: list[float | None]
    top: list[list[tuple[int, float]] | None]   # top_k (token id, log-probability), most likely first


def score_sequences(model, sequences: list[list[int]], starts: list[int], top_k: int, pad_id: int,
                    append_greedy: bool = False) -> list[Scores]:
    """Scores of `sequences[i][starts[i]:]`. `append_greedy`: each sequence also gets the most likely next
    token, with its scores, from the same forward pass (a one-token greedy answer without generate)."""
    results: list[Scores | None] = [None] * len(sequences)
    order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))   # similar lengths share a chunk
    for chunk in _chunks(order, sequences, _vocabulary(model)):
        width = max(len(sequences[i]) for i in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for row, index in enumerate(chunk):
            ids[row, :len(sequences[index])] = torch.tensor(sequences[index])
            mask[row, :len(sequences[index])] = 1
        with torch.inference_mode():
            logits = model(input_ids=ids.to(model.device), attention_mask=mask.to(model.device)).logits
        for row, index in enumerate(chunk):
            results[index] = _row_scores(logits[row], sequences[index], starts[index], top_k, append_greedy)
    return results


def _row_scores(logits: torch.Tensor, sequence: list[int], start: int, top_k: int, append_greedy: bool) -> Scores:
    first = max(1, start)                  # the first token scored with a position before it
    end = len(sequence) + (1 if append_greedy else 0)
    scores = Scores([], [], [])
    if start == 0:
        scores.ids.append(sequence[0])
        scores.logprobs.append(None)
        scores.top.append(None)
    if first >= end:
        return scores
    # position p's logits predict token p + 1
    logp = torch.log_softmax(logits[first - 1:end - 1].float(), dim=-1)
    targets = list(sequence[first:])
    if append_greedy:
        targets.append(int(logp[-1].argmax()))
    chosen = logp.gather(1, torch.tensor(targets, device=logp.device).unsqueeze(1)).squeeze(1).tolist()
    tops = _top(logp, top_k)
    scores.ids += targets
    scores.logprobs += chosen
    scores.top += tops
    return scores


def _top(logp: torch.Tensor, top_k: int) -> list[list[tuple[int, float]]]:
    if top_k <= 0:
        return [[] for _ in range(logp.shape[0])]
    values, indices = logp.topk(min(top_k, logp.shape[-1]), dim=-1)
    return [list(zip(i, v)) for i, v in zip(indices.tolist(), values.tolist())]


def _vocabulary(model) -> int:
    embeddings = model.get_output_embeddings()
    if embeddings is not None and hasattr(embeddings, "weight"):
        return int(embeddings.weight.shape[0])
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return int(config.vocab_size)


def _chunks(order: list[int], sequences: list[list[int]], vocabulary: int):
    """Rows (longest first) in groups whose padded logits fit LOGITS_BUDGET (at least one row each)."""
    chunk: list[int] = []
    for index in order:
        width = len(sequences[chunk[0]]) if chunk else len(sequences[index])
        if chunk and (len(chunk) + 1) * width * vocabulary * 4 > LOGITS_BUDGET:
            yield chunk
            chunk = []
        chunk.append(index)
    if chunk:
        yield chunk


def generate_ids(model, tokenizer, prompt: list[int], settings: GenerationSettings, max_new_tokens: int,
                 cancel: threading.Event) -> list[int]:
    """The new token ids of one answer, through the same generation config as Chat and the streamed
    answers (greedy or seeded sampling, eos, stop strings, repetition penalty)."""
    config = generation_config_for(model, tokenizer, settings, max_new_tokens)
    input_ids = torch.tensor([prompt], device=model.device)
    criteria = StoppingCriteriaList([_EventStop(cancel)])
    if settings.stop_strings:
        criteria.append(_TextStop(tokenizer, len(prompt), settings.stop_strings))
    if not settings.greedy:
        torch.manual_seed(settings.seed)
    with torch.inference_mode():
        output = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                generation_config=config, stopping_criteria=criteria)
    return output[0, len(prompt):].tolist()
