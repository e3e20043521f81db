"""Scorers over a set of answers: one result per row per scorer, and per scorer the share of rows
that pass and the mean value (what Evaluate writes per checkpoint)."""

from __future__ import annotations

from collections.abc import Callable

from backend.scoring.items import Item, Scorer


def score_rows(scorers: list[Scorer], answers: list[str], references: list[str | None],
               count_tokens: Callable[[str], int] | None = None,
               identity: tuple[str, ...] = ()) -> list[dict[str, dict]]:
    """Per row, {scorer name: {"score", "pass"}}."""
    if len(answers) != len(references):
        raise ValueError(f"{len(answers)} answers for {len(references)} references: they must pair up.")
    rows = []
    for answer, reference in zip(answers, references):
        item = Item(answer, reference, identity, count_tokens=count_tokens)
        rows.append({scorer.name: scorer.score(item).as_dict() for scorer in scorers})
    return rows


def summarise(scorers: list[Scorer], rows: list[dict[str, dict]]) -> dict[str, dict]:
    """Per scorer: its kind and spec, the share of rows passing (0-1), the mean value, the rows."""
    summary = {}
    for scorer in scorers:
        results = [row[scorer.name] for row in rows]
        n = len(results)
        summary[scorer.name] = {"kind": scorer.kind, "spec": scorer.spec, "n": n,
                                "pass": sum(r["pass"] for r in results) / n if n else None,
                                "mean": sum(r["score"] for r in results) / n if n else None}
    return summary
