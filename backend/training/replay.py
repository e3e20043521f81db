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
from backend.models.chat_templates import apply_for_model
from backend.models.fingerprint import model_fingerprint
from backend.models.greedy import greedy_finished
from backend.models.loading import DEMO_MODEL, load_model, load_tokenizer, needs_build, resolve_model_path
from backend.runs.workspace import Workspace
from backend.storage.atomic_files import atomic_write_text
from backend.training.replay_lock import replay_lock

log = logging.getLogger("backend.train")

REPLAY_VERSION = 1  # bump when the prompts or the generation change: caches are made anew
REPLAY_AUTO_BELOW = 500  # training rows; `replay: auto` mixes replay into smaller sets (a few hundred rows teach one thing)
REPLAY_MAX_NEW_TOKENS = 128
REPLAY_BATCH = 16  # prompts a generate call: a batch stops once its longest answer does, and the bar moves
CACHE_DIR = ".replay"
REPLAY_STAGE = "replay"  # the run's stage (status.json) while the base answers the prompts
# ... while it waits for another process answering them: the app's background preparation, a run.
REPLAY_WAIT_STAGES = ("replay_wait_app", "replay_wait")


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
                prompts: tuple[str, ...] = REPLAY_PROMPTS, progress=None, owner: str | None = None,
                waiting=None) -> list[dict]:
    """`count` replay rows: the base's answers to a seeded sample of the prompts. Answers are cached
    per prompt, so a run only generates the ones no earlier run needed; a prompt whose answer did
    not end is cached as such and never replayed. `progress(done, total)` follows the generation;
    `waiting(holder)` hears whoever generates for the same cache meanwhile, `owner` is who this is
    to the next one (replay_lock.py)."""
    if count <= 0:
        return []

    cache = cache_path(model_path, tokenizer, datasets_dir)
    order = _order(seed, len(prompts))
    cache.parent.mkdir(parents=True, exist_ok=True)
    with replay_lock(cache, owner, waiting) as shared:  # one generator per model: a second run waits, then reads
        answers = _read_cache(cache)
        picked: list[dict] = []
        cursor = 0
        while len(picked) < count and cursor < len(order):
            cursor = _widened(cursor, len(picked), count)
            missing = [prompts[i] for i in order[:cursor] if prompts[i] not in answers]
            if missing:
                if not answers:
                    log.info("replay: the base model answers general prompts once (cached in %s)", cache)
                answers.update(generate_answers(model_path, tokenizer, missing, shared(progress)))
                atomic_write_text(cache, "".join(json.dumps({"prompt": k, "answer": v}, ensure_ascii=False) + "\n"
                                                 for k, v in answers.items()))
            picked = [replay_row(prompts[i], answers[prompts[i]]) for i in order[:cursor] if answers.get(prompts[i])]
    log.info("replay: %d of the base model's own answers mixed into the training rows", min(count, len(picked)))
    return picked[:count]


def cache_path(model_path: str | Path, tokenizer, datasets_dir: Path) -> Path:
    """The replay cache of this model and chat template (the tokenizer holds the run's template)."""
    return Path(datasets_dir) / CACHE_DIR / f"{model_cache_key(model_path, tokenizer)}.jsonl"


def _order(seed: int, size: int) -> list[int]:
    return random.Random(seed).sample(range(size), size)


def _widened(cursor: int, picked: int, count: int) -> int:
    # About a third of the base's answers run past the token limit: ask for half again as many.
    return cursor + max(8, math.ceil((count - picked) * 1.5))


def cached_replay_count(answers: dict, count: int, seed: int, prompts: tuple[str, ...] = REPLAY_PROMPTS) -> int | None:
    """The rows replay_rows(..., count, seed) returns, counted from the cache's `answers` (prompt -> the
    answer, or anything false for one that did not end) by the same picking, without generating. None
    when the picking reaches a prompt the cache has no answer for: the run answers it first, and only
    then is the count known."""
    picked = cached_replay_prompts(answers, count, seed, prompts)
    return None if picked is None else len(picked)


def cached_replay_prompts(answers: dict, count: int, seed: int,
                          prompts: tuple[str, ...] = REPLAY_PROMPTS) -> list[str] | None:
    """The prompts of the rows replay_rows(..., count, seed) returns, picked from `answers` (see
    cached_replay_count); None when the run would answer a prompt first."""
    order, picked, cursor = _order(seed, len(prompts)), [], 0
    while len(picked) < count and cursor < len(order):
        cursor = _widened(cursor, len(picked), count)
        if any(prompts[i] not in answers for i in order[:cursor]):
            return None
        picked = [prompts[i] for i in order[:cursor] if answers.get(prompts[i])]
    return picked[:count]


def planned_replay(config, train_rows: int, answers: dict | None) -> tuple[int, bool]:
    """(replay rows the run mixes in, exact): counted from the cache's `answers` when they hold every
    answer the run's picking reaches; else replay_count, the most it can be."""
    wanted = replay_count(config, train_rows)
    counted = cached_replay_count(answers, wanted, config.seed) if answers else None
    return (wanted, False) if counted is None else (counted, True)


def workspace_answers(model: str, chat_template: str, workspace: Workspace) -> dict[str, str | None] | None:
    """cached_answers of a model named as a run names it, when it is on disk and the workspace has a
    replay cache; None otherwise (nothing is built or converted for a count)."""
    if not any((workspace.datasets_dir / CACHE_DIR).glob("*.jsonl")):
        return None
    try:
        if needs_build(model, workspace.models_dir):
            return None
        folder = Path(resolve_model_path(model or DEMO_MODEL, workspace.models_dir))
        return cached_answers(folder, chat_template, workspace.datasets_dir) if folder.is_dir() else None
    except Exception:  # noqa: BLE001 - a wrong name or an unreadable tokenizer: the count stays an upper bound
        return None


def cached_answers(model_path: str | Path, chat_template: str, datasets_dir: Path,
                   trust_remote_code: bool = False) -> dict[str, str | None]:
    """prompt -> its cached answer (None: it did not end), from the replay cache a run of this model
    and `chat_template` reads (read-only: nothing is generated, no lock is taken); {} without a cache."""
    tokenizer = load_tokenizer(str(model_path), trust_remote_code=trust_remote_code)
    apply_for_model(tokenizer, chat_template, model_path)  # the worker's key holds the run's template
    return _read_cache(cache_path(model_path, tokenizer, datasets_dir))


def replay_row(prompt: str, answer: str) -> dict:
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
