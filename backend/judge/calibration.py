"""How often the judge agrees with the user's blind votes (Chat tab), on the
same prompt and the same two answers: the judge's pairwise verdict (both
orders, pairwise.py) against the vote, each one of first / second / tie.

Reported: the agreement share, Cohen's kappa (agreement beyond what two
raters with these label frequencies reach by chance) and the number of
votes behind them. Warnings, as sentences:

* fewer than MIN_VOTES votes: too few to tell (with 20 votes a 95% interval
  on an agreement near 0.7 still spans about 0.48-0.85);
* kappa below LOW_KAPPA (0.4: "fair" or worse on Landis and Koch's scale):
  the judge's taste is not the user's; tune its prompt or use another judge.

Tuning: each candidate template is scored this way on the same votes, and the
best (kappa, then agreement; the first on a tie) is written to
RUN/eval/judge/pairwise_template.txt, which the next pairwise judgement of
the run uses when no template is given.
"""

from __future__ import annotations

from pathlib import Path

from backend.evaluation.judge_results import judge_dir
from backend.judge.asking import Asker
from backend.judge.estimates import cohen_kappa
from backend.judge.head_to_head import judge_row
from backend.judge.sources import JudgeRow
from backend.judge.templates import PAIRWISE_TEMPLATE, check_template
from backend.judge.verdicts import TIE, A, B
from backend.messages import msg
from backend.storage.atomic_files import atomic_write_json, atomic_write_text

MIN_VOTES = 20
LOW_KAPPA = 0.4
TUNED_TEMPLATE = "pairwise_template.txt"
TUNING_FILE = "tuning.json"


def vote_label(row: JudgeRow) -> str:
    first, second = row.meta["candidates"]
    return A if row.vote == first else B if row.vote == second else TIE


def agreement(judge_labels: list[str | None], vote_labels: list[str]) -> dict:
    """Agreement, kappa and warnings over the votes the judge gave a readable verdict on."""
    pairs = [(j, v) for j, v in zip(judge_labels, vote_labels) if j is not None]
    judged, voted = [j for j, _ in pairs], [v for _, v in pairs]
    n = len(pairs)
    share = sum(j == v for j, v in pairs) / n if n else None
    kappa = cohen_kappa(judged, voted)
    warnings = []
    if n < MIN_VOTES:
        warnings.append(msg("judge.few_votes", n=n, needed=MIN_VOTES))
    elif kappa is not None and kappa < LOW_KAPPA:
        warnings.append(msg("judge.low_agreement", kappa=round(kappa, 2), share=round(share, 2), n=n,
                            low=LOW_KAPPA))
    return {"votes": n, "unjudged": len(judge_labels) - n, "agreement": share, "kappa": kappa,
            "warnings": [str(w) for w in warnings], "warning_ids": [w.to_dict() for w in warnings]}


def calibrate(asker: Asker, rows: list[JudgeRow], template: str) -> dict:
    """The judge on each vote row, then its agreement with the votes; per vote: the judge's and the user's."""
    labels = []
    for row in rows:
        first, second = row.meta["candidates"]
        labels.append(judge_row(asker, row, first, second, template).outcome)
    votes = [vote_label(row) for row in rows]
    result = agreement(labels, votes)
    result["per_vote"] = [{"prompt": row.prompt, "candidates": row.meta["candidates"], "vote": row.vote,
                           "judge": label, "user": vote} for row, label, vote in zip(rows, labels, votes)]
    return result


def active_template(run_dir: Path) -> str:
    """The tuned template of the run when there is one, else the default."""
    path = judge_dir(run_dir) / TUNED_TEMPLATE
    return path.read_text(encoding="utf-8") if path.is_file() else PAIRWISE_TEMPLATE


def tune(asker: Asker, rows: list[JudgeRow], templates: dict[str, str], run_dir: Path) -> dict:
    """Each template's agreement with the votes; the best is kept for the run (TUNED_TEMPLATE)."""
    scores = {}
    for name, template in templates.items():
        check_template(template, "pairwise", name)
        scores[name] = {k: v for k, v in calibrate(asker, rows, template).items() if k != "per_vote"}
    best = max(scores, key=lambda k: (_rank(scores[k]["kappa"]), _rank(scores[k]["agreement"])))
    folder = judge_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / TUNED_TEMPLATE, templates[best])
    summary = {"best": best, "scores": scores, "kept_in": str(folder / TUNED_TEMPLATE)}
    atomic_write_json(folder / TUNING_FILE, summary)
    return summary


def _rank(value: float | None) -> float:
    return -2.0 if value is None else value
