"""Fixes on preference rows (pairs and KTO rows): the text repairs on every
message, and the removals the pair checks ask for: empty answers, chosen equal
to rejected, and contradicting preferences for the same prompt."""

from __future__ import annotations

from collections.abc import Callable

from backend.data.fix_steps import FixStep
from backend.data.textrules import answers_of, row_key, text_of

PARTS = ("prompt", "chosen", "rejected", "completion")


def map_pair_text(rows, indices, fn: Callable[[str], str], fix_id: str, params: dict):
    step, out = FixStep(fix_id, params), []
    for row, index in zip(rows, indices):
        fixed = {**row, **{k: [{**m, "content": fn(m["content"])} for m in row[k]] for k in PARTS if k in row}}
        if fixed != row:
            step.changed.append(index)
            row = fixed
        out.append(row)
    return out, step


def empty_answers(rows) -> set[int]:
    return {i for i, row in enumerate(rows) if any(not text_of(a).strip() for a in answers_of(row))}


def identical_pairs(rows) -> set[int]:
    return {i for i, row in enumerate(rows) if "chosen" in row and text_of(row["chosen"]) == text_of(row["rejected"])}


def contradicting(rows, mode: str) -> set[int]:
    """Rows whose (prompt, A over B) has a (prompt, B over A) elsewhere: drop them all, or keep the first."""
    groups: dict[tuple, list[int]] = {}
    for i, row in enumerate(rows):
        if "chosen" not in row:
            continue
        a, b = row_key(row["chosen"]), row_key(row["rejected"])
        groups.setdefault((row_key(row["prompt"]), min(a, b), max(a, b)), []).append(i)
    drop = set()
    for members in groups.values():
        directions = {row_key(rows[i]["chosen"]) for i in members}
        if len(directions) > 1:
            drop.update(members if mode == "drop" else members[1:])
    return drop
