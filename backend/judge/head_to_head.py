"""A against B on the same rows, each row asked in both orders (A first, then
B first) to cancel the judge's position bias. An order's verdict scores A
1, a tie 0.5, B 0; a row's score is the mean of its two orders:

* above 0.5 a win for A, below a loss, 0.5 a tie;
* inconsistent: the two orders name different winners (the judge followed
  the position, not the answer): scored 0.5, a tie, and counted;
* unparsed: an order whose answer has no verdict even after the retry:
  the row is left out of the rate and counted;
* identical answers are a tie without a call.

Win rate = (wins + ties / 2) / rows judged, with a Wilson 95% score interval
on that share (stats.wilson_interval, half-ties counted as half a success).
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.judge.asking import PAIRWISE_REMINDER, Asker
from backend.judge.estimates import wilson_interval
from backend.judge.sources import JudgeRow
from backend.judge.templates import fill
from backend.judge.verdicts import TIE, A, B, parse_pairwise, swap

SCORE = {A: 1.0, TIE: 0.5, B: 0.0}
INTERVAL = "Wilson 95% score interval on wins + half the ties, over the rows judged in both orders"


@dataclass
class RowVerdict:
    first: str | None  # the A-first order's verdict, in A/B letters of the checkpoints
    second: str | None  # the B-first order's, turned back into the checkpoints' letters
    identical: bool = False

    @property
    def parsed(self) -> bool:
        return self.identical or (self.first is not None and self.second is not None)

    @property
    def inconsistent(self) -> bool:
        return {self.first, self.second} == {A, B}

    @property
    def outcome(self) -> str | None:
        """A, B, tie, or None (unparsed)."""
        if self.identical:
            return TIE
        if not self.parsed:
            return None
        score = (SCORE[self.first] + SCORE[self.second]) / 2
        return A if score > 0.5 else B if score < 0.5 else TIE


def pair_prompts(row: JudgeRow, a: str, b: str, template: str) -> list[tuple[str, tuple[str, ...]]]:
    """The two prompts of a row (A first, B first) with the answers each shows, in order."""
    first, second = row.answers[a], row.answers[b]
    return [(fill(template, prompt=row.prompt, reference=row.reference, answer_a=x, answer_b=y), (x, y))
            for x, y in ((first, second), (second, first))]


def judge_row(asker: Asker, row: JudgeRow, a: str, b: str, template: str) -> RowVerdict:
    if row.answers[a].strip() == row.answers[b].strip():
        return RowVerdict(TIE, TIE, identical=True)
    (p1, ans1), (p2, ans2) = pair_prompts(row, a, b, template)
    first = asker.ask(p1, ans1, parse_pairwise, PAIRWISE_REMINDER).verdict
    second = asker.ask(p2, ans2, parse_pairwise, PAIRWISE_REMINDER).verdict
    return RowVerdict(first, swap(second))


def planned_prompts(rows: list[JudgeRow], a: str, b: str, template: str) -> list[tuple[str, tuple[str, ...]]]:
    return [p for row in rows if row.answers[a].strip() != row.answers[b].strip()
            for p in pair_prompts(row, a, b, template)]


def judge_pairwise(asker: Asker, rows: list[JudgeRow], a: str, b: str, template: str) -> dict:
    verdicts = [judge_row(asker, row, a, b, template) for row in rows]
    result = summarize(verdicts, a, b)
    result["per_row"] = [{"prompt": row.prompt, "answer_a": row.answers[a], "answer_b": row.answers[b],
                          "a_first": v.first, "b_first": v.second, "outcome": v.outcome,
                          "inconsistent": v.inconsistent}
                         for row, v in zip(rows, verdicts)]
    return result


def summarize(verdicts: list[RowVerdict], a: str, b: str) -> dict:
    outcomes = [v.outcome for v in verdicts if v.parsed]
    wins, losses, ties = outcomes.count(A), outcomes.count(B), outcomes.count(TIE)
    n = len(outcomes)
    rate = (wins + ties / 2) / n if n else None
    interval = wilson_interval(wins + ties / 2, n)
    return {"mode": "pairwise", "a": a, "b": b, "rows": len(verdicts), "judged": n, "wins": wins, "losses": losses,
            "ties": ties, "inconsistent": sum(v.inconsistent for v in verdicts),
            "identical": sum(v.identical for v in verdicts), "unparsed_rows": len(verdicts) - n,
            "win_rate": rate, "interval": list(interval) if interval else None, "interval_method": INTERVAL}
