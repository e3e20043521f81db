"""Preference rows as a stage trains on them, and what cutoff_len does to each:
one rule for the worker, the pair check, the Train tab's Plan and the
"Train on these votes" pre-fill, so all four say the same about long pairs.

* kto trains one row per answer: a pair is two rows (chosen true, rejected false);
* a row is left out when an answer is empty, when chosen equals rejected, or
  when its prompt alone fills cutoff_len: TRL's keep_start cut would leave no
  answer token to compare (TRL drops such rows itself);
* any other row over cutoff_len is trained with its answers cut at the end.

Token counts are those of the chat template (backend/data/encode.count_tokens):
the prompt with the assistant header, and the prompt with each whole answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.config_policy import ConfigError
from backend.data.encode import count_tokens
from backend.data.resolve import load_rows, resolve_dataset
from backend.data.textrules import answers_of
from backend.messages import UserError
from backend.models.chat_templates import apply_for_model
from backend.models.loading import load_tokenizer

# Why a row is left out (the worker's RowCounts reasons: summary.json, the refusal, the Plan).
EMPTY = "empty chosen / rejected answer"
SAME = "chosen same as rejected"
CUT = "answer cut away by cutoff_len"


def _text(messages: list[dict]) -> str:
    return "".join(m["content"] for m in messages)


def stage_rows(rows: list[dict], stage: str, source: str) -> list[dict]:
    """Canonical preference rows in the form the stage's TRL trainer reads.
    kto takes pairs too (chosen -> label true, rejected -> false, as TRL does)."""
    pairs = [r for r in rows if "chosen" in r]
    labelled = [r for r in rows if "completion" in r]
    if not pairs and not labelled:
        raise ConfigError(f"stage {stage} needs preference data, but {source} holds instruction rows; "
                          f"give pairs (prompt, chosen, rejected) or use stage sft.")
    if stage != "kto":
        if labelled:
            raise ConfigError(f"stage {stage} trains on chosen-rejected pairs, but {source} holds KTO rows "
                              f"(prompt, completion, label); use stage kto.")
        return [{"prompt": r["prompt"], "chosen": r["chosen"], "rejected": r["rejected"]} for r in pairs]
    out = [{"prompt": r["prompt"], "completion": r["completion"], "label": bool(r["label"])} for r in labelled]
    for r in pairs:
        out += [{"prompt": r["prompt"], "completion": r["chosen"], "label": True},
                {"prompt": r["prompt"], "completion": r["rejected"], "label": False}]
    return out


@dataclass(frozen=True)
class RowTokens:
    """One preference row measured: enough to decide its fate at any cutoff_len and stage."""
    prompt: int                  # tokens of the prompt with the assistant header
    answers: tuple[int, ...]     # tokens of the prompt + each answer (chosen, rejected; or the completion)
    empty: tuple[bool, ...]      # each answer empty (whitespace only)
    same: bool = False           # chosen equals rejected

    @property
    def longest(self) -> int:
        return max(self.answers)

    def as_kto(self) -> list[RowTokens]:
        """The rows kto trains on: one per answer."""
        return [RowTokens(self.prompt, (a,), (e,)) for a, e in zip(self.answers, self.empty)]


def measure(tokenizer, rows: list[dict], batch_size: int = 500) -> list[RowTokens]:
    """RowTokens of each canonical pair or KTO row, batched through the chat template."""
    out: list[RowTokens] = []
    for start in range(0, len(rows), batch_size):
        batch = rows[start:start + batch_size]
        prompts = count_tokens(tokenizer, [{"messages": r["prompt"], "add_generation_prompt": True} for r in batch])
        full = iter(count_tokens(tokenizer, [{"messages": r["prompt"] + a} for r in batch for a in answers_of(r)]))
        for row, prompt in zip(batch, prompts):
            texts = [_text(a) for a in answers_of(row)]
            out.append(RowTokens(prompt, tuple(next(full) for _ in texts), tuple(not t.strip() for t in texts),
                                 len(texts) == 2 and texts[0] == texts[1]))
    return out


def left_out(tokens: RowTokens, cutoff_len: int) -> str | None:
    """Why training leaves this row out (EMPTY, SAME, CUT), or None when it trains."""
    if any(tokens.empty):
        return EMPTY
    if tokens.same:   # the same rule as the same_answer check
        return SAME   # its loss is a constant: no gradient, only a skewed reward average
    if tokens.prompt >= cutoff_len:
        return CUT
    return None


@dataclass
class TrainedRows:
    """What a stage trains on out of measured rows, at one cutoff_len (the Plan's numbers)."""
    rows: int = 0                # rows the trainer gets (kto: one per answer)
    cut: int = 0                 # of them, cut to cutoff_len
    left_out: dict | None = None  # reason -> rows
    needed: int = 0              # tokens that fit every trained row whole: prompt + the longest answer


def trained_rows(measured: list[RowTokens], stage: str, cutoff_len: int) -> TrainedRows:
    out = TrainedRows(left_out={})
    for tokens in measured:
        for row in (tokens.as_kto() if stage == "kto" else [tokens]):
            reason = left_out(row, cutoff_len)
            if reason in (EMPTY, SAME):
                out.left_out[reason] = out.left_out.get(reason, 0) + 1
                continue
            out.needed = max(out.needed, row.longest)
            if reason == CUT:
                out.left_out[reason] = out.left_out.get(reason, 0) + 1
                continue
            out.rows += 1
            out.cut += row.longest > cutoff_len
    return out


# The Plan measures preference datasets up to this many rows (measured: about 600 pairs a second
# with the demo tokenizer on the 2-core dev machine, so a few seconds); beyond it, "at most".
PLAN_ROWS = 2_000


def measure_dataset(dataset: str, workspace, model_folder, chat_template: str,
                    dataset_name: str | None = None) -> list[RowTokens] | None:
    """The training file's preference rows measured with the tokenizer and chat template the worker
    will use; None for instruction data, more than PLAN_ROWS rows, or a tokenizer that cannot be
    loaded here (the worker measures then, and the Plan gives an upper bound)."""

    rows, _ = load_rows(resolve_dataset(dataset, workspace), dataset_name=dataset_name)
    rows = [r for r in rows if "chosen" in r or "completion" in r]
    if not rows or len(rows) > PLAN_ROWS:
        return None
    tokenizer = worker_tokenizer(model_folder, chat_template)
    return measure(tokenizer, rows) if tokenizer is not None else None


def worker_tokenizer(model_folder, chat_template: str):
    """The tokenizer with the chat template the worker trains with, or None when it cannot be
    loaded without the model's own code or the template does not fit (the Plan's template line
    says why)."""

    try:
        tokenizer = load_tokenizer(model_folder)
        apply_for_model(tokenizer, chat_template, model_folder)
    except (UserError, OSError, ValueError):
        return None
    return tokenizer


def fitting_cutoff(measured: list[RowTokens], floor: int, context_length: int, step: int = 32) -> int:
    """The cutoff_len that keeps every row whole (rounded up to `step` tokens, never under `floor`),
    within the model's context."""
    needed = max((t.longest for t in measured), default=0)
    return min(context_length, max(floor, -(-needed // step) * step))
