"""What the learning report asks (backend/learning/entries.py): prompts a
run never trained on, with what counts as a right answer.

* learned: the run's held-out split, as the worker splits and fills it
  (`{{name}}` / `{{author}}` filled from the run's fields). Data too small for
  one (fewer than MIN_HELD_OUT_ROWS rows, or val_size 0) is scored on its
  training rows instead, and the report says so. A run whose rows carry the
  identity placeholders is also asked the project's held-out identity
  paraphrases (backend/data/identity_rows.py), right when they name the name
  (the maker, for those that ask who made the model).
* kept: general questions with known short answers, English and Chinese
  (backend/data/general_prompts.py), in no training or replay row.

Both are capped (MAX_LEARNED, MAX_KEPT): the report's cost is bounded by its
prompt count, whatever the data's size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.config import split_sizes
from backend.data.general_prompts import HELD_OUT_QUESTIONS, HELD_OUT_QUESTIONS_ZH
from backend.data.identity_rows import HELD_OUT_IDENTITY_PROMPTS, MAKER_PROMPTS, fill_rows, identity_values
from backend.data.resolve import load_rows, resolve_dataset, run_split
from backend.data.textrules import PLACEHOLDER
from backend.models.greedy import prompt_and_reference

MIN_HELD_OUT_ROWS = 20  # rows of data below which no split is worth scoring: the training rows are
MAX_LEARNED = 24  # the user's rows asked (identity paraphrases come on top, at most MAX_IDENTITY)
MAX_IDENTITY = 8
MAX_KEPT = 16  # general questions a checkpoint is asked (of those the base answers right)
# Fewer right base answers than this say nothing about forgetting: a base model through a chat
# template it was never trained on (gemma-3-270m) answered 1 of 46 right, so "kept 0 of 1" warned.
MIN_KEPT = 5
KEPT_QUESTIONS = (*HELD_OUT_QUESTIONS, *HELD_OUT_QUESTIONS_ZH)
HELD_OUT, TRAINING_ROWS = "held-out", "training"  # where the learned prompts came from


@dataclass
class LearnedItem:
    prompt: list[dict]  # the messages before the answer
    reference: str
    identity: tuple[str, ...] = ()  # the values an answer must name (identity paraphrases, filled rows)
    kind: str = "row"  # "row" (the user's data) or "identity" (a paraphrase)

    @property
    def text(self) -> str:
        return self.prompt[-1]["content"] if self.prompt else ""


@dataclass
class LearningSet:
    learned: list[LearnedItem]
    source: str  # HELD_OUT or TRAINING_ROWS
    rows: int  # rows of the data (before the split)
    kept: list[tuple[str, tuple[str, ...]]] = field(default_factory=lambda: list(KEPT_QUESTIONS))

    def as_dict(self) -> dict:
        return {"source": self.source, "rows": self.rows, "learned_prompts": len(self.learned),
                "identity_prompts": sum(1 for item in self.learned if item.kind == "identity"),
                "kept_questions": len(self.kept)}


def answer_rows(rows: list[dict]) -> list[dict]:
    """Rows with a reference answer: chat rows as they are, pairs as their prompt and chosen answer."""
    out = []
    for row in rows:
        if "messages" in row:
            if any(m["role"] == "assistant" for m in row["messages"]):
                out.append(row)
        elif "chosen" in row and "prompt" in row:
            out.append({"messages": [*row["prompt"], *row["chosen"]]})
    return out


def has_placeholders(rows: list[dict]) -> bool:
    return any(PLACEHOLDER.search(m.get("content") or "") for row in rows for m in row.get("messages", [])
               if isinstance(m, dict))


def _run_rows(config, workspace) -> tuple[list[dict], list[dict] | None, int]:
    """(training rows, held-out rows or None, rows before the split) as the worker reads and splits them."""

    rows, eval_rows = load_rows(resolve_dataset(config.dataset, workspace), dataset_name=config.dataset_name)
    total = len(rows) + len(eval_rows or [])
    train, held = run_split(rows, eval_rows, config, config.dataset)
    return train, held, total


def _items(rows: list[dict], values: dict, identity: tuple[str, ...]) -> list[LearnedItem]:
    items = []
    for row in answer_rows(fill_rows(rows, values)):
        prompt, reference = prompt_and_reference(row["messages"])
        items.append(LearnedItem(prompt, reference, identity))
    return items


def _identity(config, train: list[dict]) -> tuple[dict, tuple[str, ...]]:
    """(the values the run fills in, the ones an answer must name: none when the rows have no placeholders)."""
    values = identity_values(config)
    placeholders = has_placeholders(answer_rows(train))
    return values, (tuple(values[k] for k in ("name", "author") if k in values) if placeholders else ())


def learning_set(config, workspace) -> LearningSet:
    """The prompts of `config`'s run, from its data as the worker reads, splits and fills it."""
    train, held, total = _run_rows(config, workspace)
    values, identity = _identity(config, train)
    use_held = bool(held) and total >= MIN_HELD_OUT_ROWS
    items = _items(held if use_held else train, values, identity)[:MAX_LEARNED]
    if identity and values.get("name"):
        for prompt in spread(HELD_OUT_IDENTITY_PROMPTS, MAX_IDENTITY):
            wanted = values.get("author") if prompt in MAKER_PROMPTS and values.get("author") else values["name"]
            items.append(LearnedItem([{"role": "user", "content": prompt}], wanted, (wanted,), "identity"))
    return LearningSet(items, HELD_OUT if use_held else TRAINING_ROWS, total)


def training_items(config, workspace, count: int) -> list[LearnedItem]:
    """`count` of the run's own training rows, spread through them and filled as it trains them:
    what the learned stop asks (backend/training/learned_stop.py). Never a held-out row."""
    train, _, _ = _run_rows(config, workspace)
    values, identity = _identity(config, train)
    return spread(tuple(_items(train, values, identity)), count)


def plan_counts(rows: int, has_own_eval: bool, val_size: float) -> tuple[int, bool]:
    """(the user's rows the report will ask, whether they are held out) for a dataset of `rows`
    usable rows, as learning_set() will choose them: the Plan's figures, before any row is read."""

    if has_own_eval:
        return MAX_LEARNED, True  # the data's own eval split: its size is not counted here
    train, held = split_sizes(rows, val_size)
    if held and rows >= MIN_HELD_OUT_ROWS:
        return min(MAX_LEARNED, held), True
    return min(MAX_LEARNED, train), False


def spread(items: tuple, count: int) -> list:
    """`count` items taken evenly through `items` (the English and the Chinese ones both)."""
    if len(items) <= count:
        return list(items)
    return [items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)]
