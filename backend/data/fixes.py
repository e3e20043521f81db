"""One-click fixes on canonical rows. Each fix returns new rows (the input
rows and the user's file are never modified) and reports exactly which rows
it changed or removed, by their row number in the source file.

Fixes compose in a fixed order that makes sense: text repairs first (so a
row emptied by stripping HTML is then dropped as empty, and rows that differ
only in stray characters are then caught as duplicates), then removals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from backend.data.encode import count_tokens
from backend.data.fix_steps import FixStep
from backend.data.pairwise import is_preference_row
from backend.data.textrules import (
    fill_placeholders,
    normalize,
    prompt_and_response,
    remove_control,
    row_key,
    strip_html,
)
from backend.messages import UserError, msg

CONFLICT_MODES = ("drop", "keep-first")
OVER_CUTOFF_MODES = ("drop", "truncate")


@dataclass
class FixPlan:
    remove_control_chars: bool = False
    strip_html: bool = False
    normalize: bool = False
    fill: dict[str, str] = field(default_factory=dict)  # placeholder name -> value
    drop_empty: bool = False
    drop_duplicates: bool = False
    drop_near_duplicates: bool = False  # also removes exact duplicates: they fold equal too
    conflicts: str | None = None  # drop | keep-first
    over_cutoff: str | None = None  # drop | truncate (needs a tokenizer)
    drop_identical_pairs: bool = False  # preference pairs whose chosen equals rejected

    def __post_init__(self):
        if self.conflicts not in (None, *CONFLICT_MODES):
            raise FixRefused(msg("fix.mode", name="conflicts", allowed=CONFLICT_MODES, value=self.conflicts))
        if self.over_cutoff not in (None, *OVER_CUTOFF_MODES):
            raise FixRefused(msg("fix.mode", name="over_cutoff", allowed=OVER_CUTOFF_MODES, value=self.over_cutoff))


class FixRefused(UserError, ValueError):
    """A fix plan that cannot be applied; the message is catalogued (backend/messages.py)."""


@dataclass
class Fixed:
    rows: list[dict]
    indices: list[int]  # source row number of each row
    steps: list[FixStep]


def apply_fixes(rows: list[dict], indices: list[int], plan: FixPlan, tokenizer=None, cutoff_len: int = 1024) -> Fixed:
    if rows and is_preference_row(rows[0]):
        return apply_pair_fixes(rows, indices, plan)
    steps: list[FixStep] = []
    text_fixes: list[tuple[str, dict, Callable[[str], str], bool]] = [
        ("remove_control_chars", {}, remove_control, plan.remove_control_chars),
        ("strip_html", {}, strip_html, plan.strip_html),
        ("normalize", {"unicode": "NFC"}, normalize, plan.normalize),
        ("fill_placeholders", {"values": dict(plan.fill)}, lambda t: fill_placeholders(t, plan.fill), bool(plan.fill)),
    ]
    for fix_id, params, fn, wanted in text_fixes:
        if wanted:
            rows, step = map_text(rows, indices, fn, fix_id, params)
            steps.append(step)
    removals: list[tuple[str, dict, Callable, bool]] = [
        ("drop_empty", {}, _empty, plan.drop_empty),
        ("drop_duplicates", {"keep": "first"}, _keyed(lambda m: row_key(m)), plan.drop_duplicates),
        ("drop_near_duplicates", {"keep": "first"}, _keyed(lambda m: row_key(m, folded=True)), plan.drop_near_duplicates),
        ("conflicts", {"mode": plan.conflicts}, lambda rs: _conflicts(rs, plan.conflicts), bool(plan.conflicts)),
    ]
    for fix_id, params, finder, wanted in removals:
        if wanted:
            rows, indices, step = drop_rows(rows, indices, finder(rows), fix_id, params)
            steps.append(step)
    if plan.over_cutoff:
        if tokenizer is None:
            raise FixRefused(msg("fix.needs_model"))
        rows, indices, step = fix_over_cutoff(rows, indices, tokenizer, cutoff_len, plan.over_cutoff)
        steps.append(step)
    return Fixed(rows, indices, steps)


def apply_pair_fixes(rows: list[dict], indices: list[int], plan: FixPlan) -> Fixed:
    """The same plan on preference rows: text repairs on every message, then the pair removals."""
    from backend.data import pair_fixes

    if plan.over_cutoff or plan.drop_duplicates or plan.drop_near_duplicates:
        raise FixRefused(msg("fix.pairs"))
    steps: list[FixStep] = []
    for fix_id, params, fn, wanted in [
        ("remove_control_chars", {}, remove_control, plan.remove_control_chars),
        ("strip_html", {}, strip_html, plan.strip_html),
        ("normalize", {"unicode": "NFC"}, normalize, plan.normalize),
        ("fill_placeholders", {"values": dict(plan.fill)}, lambda t: fill_placeholders(t, plan.fill), bool(plan.fill)),
    ]:
        if wanted:
            rows, step = pair_fixes.map_pair_text(rows, indices, fn, fix_id, params)
            steps.append(step)
    for fix_id, params, finder, wanted in [
        ("drop_empty", {}, pair_fixes.empty_answers, plan.drop_empty),
        ("drop_identical_pairs", {}, pair_fixes.identical_pairs, plan.drop_identical_pairs),
        ("conflicts", {"mode": plan.conflicts}, lambda rs: pair_fixes.contradicting(rs, plan.conflicts),
         bool(plan.conflicts)),
    ]:
        if wanted:
            rows, indices, step = drop_rows(rows, indices, finder(rows), fix_id, params)
            steps.append(step)
    return Fixed(rows, indices, steps)


def map_text(rows, indices, fn: Callable[[str], str], fix_id: str, params: dict) -> tuple[list[dict], FixStep]:
    """Apply `fn` to every message content; unchanged rows are passed through as they are."""
    step, out = FixStep(fix_id, params), []
    for row, index in zip(rows, indices):
        messages = [{**m, "content": fn(m["content"])} for m in row["messages"]]
        if any(a["content"] != b["content"] for a, b in zip(messages, row["messages"])):
            step.changed.append(index)
            row = {**row, "messages": messages}
        out.append(row)
    return out, step


def drop_rows(rows, indices, drop: set[int], fix_id: str, params: dict):
    """Remove the rows at positions `drop` (positions in `rows`, not source numbers)."""
    step = FixStep(fix_id, params, removed=[indices[i] for i in sorted(drop)])
    kept = [i for i in range(len(rows)) if i not in drop]
    return [rows[i] for i in kept], [indices[i] for i in kept], step


def _empty(rows) -> set[int]:
    return {i for i, row in enumerate(rows) if any(not m["content"].strip() for m in row["messages"])}


def _keyed(key: Callable[[list[dict]], bytes]) -> Callable[[list[dict]], set[int]]:
    def positions(rows) -> set[int]:
        seen: set[bytes] = set()
        drop = set()
        for i, row in enumerate(rows):
            k = key(row["messages"])
            if k in seen:
                drop.add(i)
            seen.add(k)
        return drop

    return positions


def _conflicts(rows, mode: str) -> set[int]:
    """Prompt groups with more than one distinct response: drop all, or all but the first."""
    groups: dict[bytes, list[int]] = {}
    responses: dict[bytes, set[bytes]] = {}
    for i, row in enumerate(rows):
        prompt, response = prompt_and_response(row["messages"])
        if not any(m["role"] == "user" for m in prompt):
            continue
        k = row_key(prompt)
        groups.setdefault(k, []).append(i)
        responses.setdefault(k, set()).add(row_key([{"role": "assistant", "content": response}]))
    drop = set()
    for k, members in groups.items():
        if len(responses[k]) > 1:
            drop.update(members if mode == "drop" else members[1:])
    return drop


def fix_over_cutoff(rows, indices, tokenizer, cutoff_len: int, mode: str):
    lengths = count_tokens(tokenizer, rows)
    over = {i for i, n in enumerate(lengths) if n > cutoff_len}
    params = {"mode": mode, "cutoff_len": cutoff_len}
    if mode == "drop":
        return drop_rows(rows, indices, over, "over_cutoff", params)
    out, changed, impossible = list(rows), [], set()
    for i in sorted(over):
        cut = _truncate_response(tokenizer, rows[i], cutoff_len)
        if cut is None:
            impossible.add(i)
        else:
            out[i] = cut
            changed.append(indices[i])
    out, kept, step = drop_rows(out, indices, impossible, "over_cutoff", params)
    step.changed = changed
    return out, kept, step


def _truncate_response(tokenizer, row: dict, cutoff_len: int) -> dict | None:
    """The row with its last assistant message shortened (whole characters) to fit, or None."""
    messages = row["messages"]
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    text = messages[last]["content"]

    def with_content(n: int) -> dict:
        cut = [*messages[:last], {**messages[last], "content": text[:n]}, *messages[last + 1 :]]
        return {**row, "messages": cut}

    def fits(n: int) -> bool:
        return count_tokens(tokenizer, [with_content(n)])[0] <= cutoff_len

    if not fits(1):  # the prompt alone fills the cutoff: nothing of the response would train
        return None
    lo, hi = 1, len(text)  # fits(lo) is true, fits(hi) is false
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return with_content(lo)
