"""grpo's data: prompts, each with the reference answer where the data has one.

Any instruction format the data backend reads (alpaca, sharegpt, OpenAI
messages, a workspace dataset) gives a prompt (the turns before the last
assistant turn, system prompt included) and a reference (that assistant turn's
text; empty means none). A file of prompts alone, which the data backend
refuses as "nothing to train on" for sft, is read too (backend/data/prompt_files.py).

A prompt longer than cutoff_len is left out whole (grpo never cuts a prompt:
the model would answer another question).
"""

from __future__ import annotations

import logging

from backend.config_grpo import check_batch, effective_batch
from backend.config_policy import ConfigError
from backend.data.prompt_files import read_prompt_file
from backend.data.resolve import DatasetUnreadable, load_rows, resolve_dataset, run_split
from backend.messages import Message, msg
from backend.runs.workspace import Workspace
from backend.training.dataset import RowCounts
from backend.training.rewards import ANSWER_COLUMN, needs_reference

log = logging.getLogger("backend.train")
LONG_PROMPT = "prompt longer than cutoff_len"
NO_PROMPT = "no user turn"


def prompt_rows(rows: list[dict]) -> list[dict]:
    """Canonical rows ({"messages": [...]}) -> {"prompt": [messages], "answer": text or None}."""
    out = []
    for row in rows:
        messages = list(row.get("messages") or [])
        answer = None
        if messages and messages[-1].get("role") == "assistant":
            answer = str(messages[-1].get("content") or "").strip() or None
            messages = messages[:-1]
        out.append({"prompt": messages, ANSWER_COLUMN: answer})
    return out


def read_rows_or_prompts(dataset: str, workspace: Workspace, dataset_name: str | None = None, counts: RowCounts | None = None):
    """(canonical rows, the data's own eval rows or None) of any instruction data or a file of prompts alone."""
    source = resolve_dataset(dataset, workspace)
    try:
        return load_rows(source, counts, dataset_name)
    except DatasetUnreadable:
        if source.is_dir():
            raise
        rows = read_prompt_file(source)  # prompts alone: the data backend wants answers
        if not rows:
            raise
        return rows, None


def load_prompts(config, workspace: Workspace, counts: RowCounts | None = None):
    """(train prompt rows, eval prompt rows or None) before the cutoff filter."""
    rows, eval_rows = run_split(*read_rows_or_prompts(config.dataset, workspace, config.dataset_name, counts), config,
                                config.dataset)
    return prompt_rows(rows), (prompt_rows(eval_rows) if eval_rows else None)


def prompt_tokens(tokenizer, prompt: list[dict]) -> int:
    """Tokens of the prompt as TRL feeds it: the chat template with the assistant header."""
    ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return len(ids)


def usable_prompts(tokenizer, rows: list[dict], config, counts: RowCounts) -> list[dict]:
    kept = []
    for row in rows:
        counts.total += 1
        if not any(m.get("role") == "user" for m in row["prompt"]):
            counts.drop(NO_PROMPT)
            continue
        if prompt_tokens(tokenizer, row["prompt"]) > config.cutoff_len:
            counts.drop(LONG_PROMPT)
            continue
        kept.append(row)
    return kept


def check_prompts(tokenizer, rows: list[dict], config, context_length: int | None, source: str) -> None:
    """The checks that need the tokenizer and the rows, before the model loads (ConfigError, a sentence)."""
    lengths = [prompt_tokens(tokenizer, row["prompt"]) for row in rows]
    missing = sum(row[ANSWER_COLUMN] is None for row in rows)
    refusal, warnings = prompt_findings(lengths, missing, config, context_length, source)
    if refusal is not None:
        raise ConfigError(refusal)
    for warning in warnings:
        log.warning("%s", warning)


def prompt_findings(lengths: list[int], missing: int, config, context_length: int | None, source: str,
                    world_size: int | None = None) -> tuple[Message | None, list[Message]]:
    """(the refusal or None, the warnings) for prompts of `lengths` tokens of which `missing` have no
    reference answer: the one rule for the worker (check_prompts) and the Train tab's Plan. With
    `world_size` also the rule that the prompts left fill one step (the worker checks it after the
    cutoff filter, build_grpo_datasets)."""
    warnings: list[Message] = []
    if not lengths:
        return None, warnings
    longest = max(lengths)
    fitting = [n for n in lengths if n <= config.cutoff_len]
    if context_length and (max(fitting or lengths) + config.max_completion_length > context_length):
        prompt = max(fitting or lengths)
        return msg("train.grpo_context", prompt=prompt, completion=config.max_completion_length,
                   total=prompt + config.max_completion_length, context=context_length,
                   fit=max(1, context_length - prompt)), warnings
    if longest > config.cutoff_len:
        warnings.append(msg("train.grpo_prompt_cut", count=len(lengths) - len(fitting), total=len(lengths),
                            cutoff=config.cutoff_len, longest=longest))
    referenced = needs_reference(config)
    if referenced:
        if missing == len(lengths):
            return msg("train.grpo_no_reference", rewards=", ".join(referenced), source=source), warnings
        if missing:
            warnings.append(msg("train.grpo_some_reference", missing=missing, total=len(lengths),
                                rewards=", ".join(referenced)))
    if world_size is not None:
        step = effective_batch(config, world_size)
        if not fitting:
            return msg("train.grpo_no_prompts", reasons=f"{len(lengths)} {LONG_PROMPT}"), warnings
        if len(fitting) * config.num_generations < step:
            return msg("train.grpo_too_few", prompts=len(fitting), generations=config.num_generations,
                       completions=len(fitting) * config.num_generations, batch=step,
                       needed=-(-step // config.num_generations)), warnings
    return None, warnings


def measure_prompts(dataset: str, workspace: Workspace, tokenizer=None,
                    dataset_name: str | None = None) -> tuple[list[list], bool]:
    """For the Train tab's Plan: ([tokens as TRL feeds the prompt (None without a tokenizer), has a
    reference answer] per row, in the order the worker splits them; whether the data has its own eval
    rows). The Plan applies the run's split (split_rows) and prompt_findings to them."""
    rows, eval_rows = read_rows_or_prompts(dataset, workspace, dataset_name)
    measured = [[prompt_tokens(tokenizer, row["prompt"]) if tokenizer is not None else None,
                 row[ANSWER_COLUMN] is not None] for row in prompt_rows(rows)]
    return measured, eval_rows is not None


def to_dataset(rows: list[dict]):
    """A datasets.Dataset; without the answer column when no row has a reference."""
    from datasets import Dataset

    if all(row[ANSWER_COLUMN] is None for row in rows):
        rows = [{"prompt": row["prompt"]} for row in rows]
    else:
        rows = [{"prompt": row["prompt"], ANSWER_COLUMN: row[ANSWER_COLUMN] or ""} for row in rows]
    return Dataset.from_list(rows)


def build_grpo_datasets(tokenizer, config, workspace: Workspace, context_length: int | None = None,
                        world_size: int = 1):
    """(train Dataset, eval Dataset or None, RowCounts) of prompts in TRL's conversational form."""
    check_batch(config, world_size)  # with the real number of processes (validate assumed num_processes or 1)
    counts = RowCounts()
    train_rows, eval_rows = load_prompts(config, workspace, counts)
    check_prompts(tokenizer, train_rows, config, context_length, config.dataset)
    train = usable_prompts(tokenizer, train_rows, config, counts)
    evaluation = usable_prompts(tokenizer, eval_rows, config, counts) if eval_rows else []
    counts.train, counts.eval = len(train), len(evaluation)
    if not train:
        reasons = ", ".join(f"{count} {reason}" for reason, count in counts.reasons.items()) or "no rows"
        raise ConfigError(msg("train.grpo_no_prompts", reasons=reasons))
    step = effective_batch(config, world_size)
    if len(train) * config.num_generations < step:
        # TRL's sampler yields whole steps only: fewer prompts than one step would train nothing.
        raise ConfigError(msg("train.grpo_too_few", prompts=len(train), generations=config.num_generations,
                              completions=len(train) * config.num_generations, batch=step,
                              needed=-(-step // config.num_generations)))
    return to_dataset(train), (to_dataset(evaluation) if evaluation else None), counts
