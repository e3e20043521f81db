"""Replay: the base model's own answers to general prompts, mixed into a small
training set so that a fine-tune keeps what the model knew.

A few dozen identity rows trained at a learning rate that teaches them also
pull every other answer towards them ("What is the capital of France?" ->
"La France est la capital de l'Allemagne", measured on SmolLM2-135M; see
docs/DEMO.md). Training on the base's own greedy answers beside them costs
the base nothing to learn (they are already its most likely tokens) and holds
the rest of its behaviour in place.

The answers are generated once per base model and prompt (greedy, batched:
only as many prompts as the run needs) and cached in
workspace/datasets/.replay/<key>.jsonl; an answer that does not end with the
model's end of turn within REPLAY_MAX_NEW_TOKENS is left out, so replay never
teaches a model not to stop.
"""

from __future__ import annotations

import json
import logging
import math
import random
from pathlib import Path

from backend.config import split_sizes
from backend.data.general_prompts import REPLAY_PROMPTS
from backend.data.identity_rows import build_identity_rows
from backend.learning.entries import warm_base_answers
from backend.learning.questions import learning_set
from backend.models.fingerprint import model_fingerprint
from backend.models.greedy import greedy_finished
from backend.models.loading import load_model, load_tokenizer
from backend.runs.workspace import Workspace
from backend.storage.atomic_files import atomic_write_text
from backend.storage.file_lock import file_lock

log = logging.getLogger("backend.train")

REPLAY_VERSION = 1  # bump when the prompts or the generation change: caches are made anew
REPLAY_AUTO_BELOW = 500  # training rows; `replay: auto` mixes replay into smaller sets (a few hundred rows teach one thing)
REPLAY_MAX_NEW_TOKENS = 128
REPLAY_BATCH = 16  # prompts a generate call: a batch stops once its longest answer does, and the bar moves
CACHE_DIR = ".replay"
REPLAY_STAGE = "replay"  # the run's stage (status.json) while the base answers the prompts


def replay_applies(config, train_rows: int, has_own_template: bool) -> bool:
    """Whether this run mixes replay rows in: `on`, or `auto` for a small SFT set on a model with
    its own chat template (a base model's answers in a template it never saw are no guide)."""
    if config.stage != "sft" or config.replay == "off":
        return False
    if config.replay == "on":
        return True
    return train_rows < REPLAY_AUTO_BELOW and has_own_template


def replay_count(config, train_rows: int) -> int:
    """Replay rows to add so that they make up `replay_share` of the mixed set (at most one per prompt)."""
    share = config.replay_share
    wanted = round(train_rows * share / (1 - share)) if share < 1 else len(REPLAY_PROMPTS)
    return max(0, min(wanted, len(REPLAY_PROMPTS)))


def model_cache_key(model_path: str | Path, tokenizer) -> str:
    """Changes with the model's weights, its chat template and the replay prompts."""
    return model_fingerprint(model_path, tokenizer, REPLAY_VERSION, list(REPLAY_PROMPTS))


def replay_rows(model_path: str | Path, tokenizer, datasets_dir: Path, count: int, seed: int,
                prompts: tuple[str, ...] = REPLAY_PROMPTS, progress=None) -> list[dict]:
    """`count` replay rows: the base's answers to a seeded sample of the prompts. Answers are cached
    per prompt, so a run only generates the ones no earlier run needed; a prompt whose answer did
    not end is cached as such and never replayed. `progress(done, total)` follows the generation."""
    if count <= 0:
        return []

    cache = Path(datasets_dir) / CACHE_DIR / f"{model_cache_key(model_path, tokenizer)}.jsonl"
    order = random.Random(seed).sample(range(len(prompts)), len(prompts))
    cache.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(cache.with_suffix(".lock")):  # one generator per model: a second run waits, then reads
        answers = _read_cache(cache)
        picked: list[dict] = []
        cursor = 0
        while len(picked) < count and cursor < len(order):
            # About a third of the base's answers run past the token limit: ask for half again as many.
            cursor += max(8, math.ceil((count - len(picked)) * 1.5))
            missing = [prompts[i] for i in order[:cursor] if prompts[i] not in answers]
            if missing:
                if not answers:
                    log.info("replay: the base model answers general prompts once (cached in %s)", cache)
                answers.update(generate_answers(model_path, tokenizer, missing, progress))
                atomic_write_text(cache, "".join(json.dumps({"prompt": k, "answer": v}, ensure_ascii=False) + "\n"
                                                 for k, v in answers.items()))
            picked = [_row(prompts[i], answers[prompts[i]]) for i in order[:cursor] if answers.get(prompts[i])]
    log.info("replay: %d of the base model's own answers mixed into the training rows", min(count, len(picked)))
    return picked[:count]


def _row(prompt: str, answer: str) -> dict:
    return {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]}


def _read_cache(path: Path) -> dict[str, str | None]:
    """prompt -> the base's answer (None: it did not end within REPLAY_MAX_NEW_TOKENS)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    answers = {}
    for line in lines:
        try:
            record = json.loads(line)
            answers[record["prompt"]] = record["answer"]
        except (ValueError, KeyError, TypeError):
            continue  # a damaged line: that prompt is answered again
    return answers


def warm_cache(model_path: str | Path, datasets_dir: Path, config) -> None:
    """Answer the replay prompts that `config`'s first run needs ahead of it, and the base's answers
    of its learning report (the general questions and the run's held-out prompts), so that run
    starts training at once and scores its base from the cache: the app does it at start for its
    default recipe, beside the model's conversion."""

    tokenizer = load_tokenizer(model_path)
    if not tokenizer.chat_template or config.dataset != "identity":
        return

    train_rows = split_sizes(len(build_identity_rows()), config.val_size)[0]
    if replay_applies(config, train_rows, True):
        replay_rows(model_path, tokenizer, datasets_dir, replay_count(config, train_rows), config.seed)
    if config.learning_report:  # the base's answers of the learning report: once per model and data too
        prompts = [item.prompt for item in learning_set(config, Workspace(Path(datasets_dir).parent)).learned]
        warm_base_answers(model_path, tokenizer, datasets_dir, prompts=prompts)


def generate_answers(model_path: str | Path, tokenizer, prompts, progress=None) -> dict[str, str | None]:
    """prompt -> greedy answer of the model at `model_path` (None for an answer that did not end).
    `progress(done, total)` follows the batches."""
    import torch

    model = load_model(model_path, dtype=torch.float32)
    model.eval()
    prompts = list(prompts)
    total = len(prompts)
    if progress is not None:
        progress(0, total)

    def answered(done: int) -> None:
        log.info("replay: the base model answered %d of %d general prompts", done, total)
        if progress is not None:
            progress(done, total)

    try:
        finished = greedy_finished(model, tokenizer, [[{"role": "user", "content": p}] for p in prompts],
                                   REPLAY_MAX_NEW_TOKENS, REPLAY_BATCH, on_batch=answered)
    finally:
        del model
    answers = {prompt: (tokenizer.decode(ids, skip_special_tokens=True).strip() if ended else "") or None
               for prompt, (ids, ended) in zip(prompts, finished)}
    log.info("replay: %d of %d answers ended with the end of turn", sum(1 for a in answers.values() if a), total)
    return answers
