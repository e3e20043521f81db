"""Several columns answered by one `generate` call, streamed together.

The base model and its LoRA checkpoints run as one batch: peft applies each
row's own adapter (`adapter_names`, "__base__" for the base itself), so five
columns cost about one forward pass per token, not five answers in a row.

Greedy answers equal one-column-at-a-time generation: prompts are padded on
the left with an attention mask (position ids follow the mask), each row stops
at its own eos or token limit, and each row's text is decoded by its own
TextStreamer exactly as the single-column path decodes it. Sampled answers
draw from one generator for the whole batch, so they differ from one column
at a time (the seed still makes them repeatable).

What cannot share a batch (engine.py groups them apart): a full fine-tuned
checkpoint (another model), a DoRA adapter (peft 0.21 refuses `adapter_names`
with DoRA), and, with a repetition penalty, prompts of other lengths (the
penalty would also count the padding tokens).
"""

from __future__ import annotations

import queue
import threading
import time

import torch
from transformers import StoppingCriteria, StoppingCriteriaList, TextStreamer
from transformers.generation.streamers import BaseStreamer

from backend.chat.generation import Prompt, Reply, _eos_ids, _EventStop, _explain, generation_config_for

BASE_ADAPTER = "__base__"   # peft's name for "no adapter" in a mixed batch


class _RowText(TextStreamer):
    """One row's text, decoded as TextIteratorStreamer decodes a single answer."""

    def __init__(self, tokenizer):
        super().__init__(tokenizer, skip_prompt=True, skip_special_tokens=True)
        self.text = ""

    def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
        self.text += text


class _BatchStreamer(BaseStreamer):
    """Feeds each unfinished row's new token to its _RowText; signals the reader after each step."""

    def __init__(self, tokenizer, prompts: list[Prompt], eos: set[int]):
        self.rows = [_RowText(tokenizer) for _ in prompts]
        self.limits = [p.max_new_tokens for p in prompts]
        self.counts = [0] * len(prompts)
        self.last = [None] * len(prompts)
        self.eos = {token for token in eos if token is not None}
        self.changed: queue.Queue = queue.Queue()
        self._prompt_seen = False

    def done(self, row: int) -> bool:
        return self.counts[row] >= self.limits[row] or self.last[row] in self.eos

    def put(self, value) -> None:
        if not self._prompt_seen:   # generate hands the prompt in first
            self._prompt_seen = True
            for row in self.rows:
                row.next_tokens_are_prompt = False
            return
        for index, token in enumerate(value.reshape(-1).tolist()):
            if self.done(index):
                continue   # a finished row only gets padding from here on
            self.counts[index] += 1
            self.last[index] = token
            self.rows[index].put(torch.tensor([token]))
        self.changed.put(True)

    def end(self) -> None:
        for row in self.rows:
            row.end()
        self.changed.put(None)


class _RowLimit(StoppingCriteria):
    """Ends each row at its own max_new_tokens (the context may cap one prompt's answer more)."""

    def __init__(self, prompt_length: int, limits: list[int]):
        self.prompt_length = prompt_length
        self.limits = torch.tensor(limits)

    def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
        made = input_ids.shape[1] - self.prompt_length
        return (self.limits.to(input_ids.device) <= made)


def is_dora(entry, target) -> bool:
    config = getattr(entry.model, "peft_config", {}).get(entry.adapters.get(target.checkpoint))
    return bool(getattr(config, "use_dora", False))


def groups(targets, entries, prompts, settings) -> list[list[int]]:
    """Column indices that can share one generate call, in column order: one model each; DoRA
    alone (no mixed-adapter batches in peft 0.21); under a repetition penalty, equal prompt lengths
    only (the penalty would count left padding as generated text)."""
    found: dict[tuple, list[int]] = {}
    for index, (target, entry, prompt) in enumerate(zip(targets, entries, prompts)):
        if entry is None:
            continue
        if target.kind == "lora" and is_dora(entry, target):
            key = ("alone", index)
        else:
            length = prompt.input_ids.shape[1] if settings.repetition_penalty != 1.0 else None
            key = (id(entry), length)
        found.setdefault(key, []).append(index)
    return list(found.values())


def adapter_names_for(entry, targets: list) -> list[str] | None:
    """peft's per-row adapters for a batch on a PeftModel ("__base__" = adapters off); None: no mixing
    (a plain model, or one DoRA column, answered through set_adapter)."""
    from peft import PeftModel

    if not isinstance(entry.model, PeftModel) or any(t.kind == "lora" and is_dora(entry, t) for t in targets):
        return None
    return [entry.adapters[t.checkpoint] if t.kind == "lora" else BASE_ADAPTER for t in targets]


def left_padded(prompts: list[Prompt], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask), every prompt ending where generation starts."""
    width = max(p.input_ids.shape[1] for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        length = prompt.input_ids.shape[1]
        ids[row, width - length:] = prompt.input_ids[0]
        mask[row, width - length:] = 1
    return ids, mask


def generate_together(model, tokenizer, prompts: list[Prompt], settings, stop: threading.Event,
                      replies: list[Reply], adapter_names: list[str] | None = None):
    """Yield the list of the rows' texts as they grow; fill `replies` (one per prompt).

    Runs model.generate in a thread; abandoning the iterator stops it and joins the thread."""
    limit = max(p.max_new_tokens for p in prompts)
    config = generation_config_for(model, tokenizer, settings, limit)
    streamer = _BatchStreamer(tokenizer, prompts, _eos_ids(config))
    input_ids, mask = left_padded(prompts, config.pad_token_id)
    device = model.device
    extra = {"adapter_names": adapter_names} if adapter_names else {}
    criteria = StoppingCriteriaList([_EventStop(stop, abandoned := threading.Event()),
                                     _RowLimit(input_ids.shape[1], [p.max_new_tokens for p in prompts])])
    outcome: dict = {}

    def work() -> None:
        try:
            if not settings.greedy:
                torch.manual_seed(settings.seed)
            with torch.inference_mode():
                model.generate(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                               generation_config=config, streamer=streamer, stopping_criteria=criteria, **extra)
        except Exception as error:  # noqa: BLE001 - reported to the user in every row's reply
            outcome["error"] = error
            streamer.changed.put(None)

    start = time.perf_counter()
    thread = threading.Thread(target=work, name="chat-generate-batch", daemon=True)
    thread.start()
    drained = False
    try:
        while streamer.changed.get() is not None:
            yield [row.text for row in streamer.rows]
        drained = True
    finally:
        if not drained:
            abandoned.set()
        thread.join()
    seconds = time.perf_counter() - start
    for index, reply in enumerate(replies):
        reply.text, reply.seconds, reply.new_tokens = streamer.rows[index].text, seconds, streamer.counts[index]
        if "error" in outcome:
            reply.fail(_explain(outcome["error"]))
        elif streamer.last[index] in streamer.eos:
            reply.finish = "eos"
        elif stop.is_set() and streamer.counts[index] < streamer.limits[index]:
            reply.finish = "stopped"
        else:
            reply.finish = "length"
    yield [reply.text for reply in replies]
