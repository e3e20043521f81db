"""The answers a judge reads, as JudgeRows (one prompt, its reference, each
checkpoint's answer), from one of four places, none of which loads a model:

* learning: RUN/eval/learning.json, the greedy answers of the base and each
  checkpoint to the run's held-out prompts (written as the run trains, or by
  `python -m backend.evaluate --run R --learning`); `identity` keeps only the
  held-out identity paraphrases;
* predictions: RUN/eval/<checkpoint>/predictions.jsonl, the greedy answers to
  the held-out split (or the file) scored by `python -m backend.evaluate --run R`;
* file: a JSONL file of {"prompt", "reference"?, "answers": {checkpoint: text}};
* votes: the Chat tab's blind votes (RUN/preferences.json), each a prompt with
  the answers shown side by side and the user's pick: the rows the judge is
  calibrated on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from backend.chat.preferences import read_preferences
from backend.chat.vote_data import answer_contexts
from backend.evaluation.results import load_predictions
from backend.learning.entries import load_report
from backend.messages import UserError, msg

SOURCES = ("learning", "identity", "predictions", "file", "votes")


class JudgeSourceError(UserError, ValueError):
    """No answers to judge where they were looked for; the message says how to get them."""


@dataclass
class JudgeRow:
    prompt: str  # the request, as the judge reads it (earlier turns of a conversation included)
    answers: dict[str, str]  # checkpoint name -> its answer
    reference: str = ""
    kind: str = ""  # where in the source it came from (identity, row, kept, vote)
    vote: str | None = None  # votes only: the winner's checkpoint name, or "tie"
    meta: dict = field(default_factory=dict)


def conversation_text(messages: list[dict]) -> str:
    """A conversation as the judge reads it: one turn alone is its text, more turns are labelled."""
    if len(messages) == 1:
        return messages[0].get("content", "")
    return "\n".join(f"{m.get('role', 'user')}: {m.get('content', '')}" for m in messages)


def learning_rows(run_dir: Path, identity_only: bool = False) -> list[JudgeRow]:
    report = load_report(run_dir)
    if report is None:
        raise JudgeSourceError(msg("judge.no_learning", run=Path(run_dir).name))
    rows: dict[str, JudgeRow] = {}
    for entry in report["checkpoints"]:
        for example in entry.get("examples", []):
            if example["kind"] != "learned" or (identity_only and example.get("source") != "identity"):
                continue
            row = rows.setdefault(example["prompt"], JudgeRow(example["prompt"], {}, example.get("reference", ""),
                                                              example.get("source", "")))
            row.answers[entry["checkpoint"]] = example["answer"]
    return list(rows.values())


def prediction_rows(run_dir: Path, names: list[str]) -> list[JudgeRow]:
    rows: dict[tuple[int, str], JudgeRow] = {}
    for name in names:
        for line in load_predictions(run_dir, name):
            key = (line.get("index", 0), line.get("prompt", ""))
            row = rows.setdefault(key, JudgeRow(line.get("prompt", ""), {}, line.get("reference", ""), "row"))
            row.answers[name] = line.get("prediction", "")
    return list(rows.values())


def file_rows(path: Path) -> list[JudgeRow]:
    """Rows of a JSONL file; a line that is not {"prompt": text, "answers": {name: text}} is named."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise JudgeSourceError(msg("judge.bad_file", path=path, line=0, error=error)) from None
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise JudgeSourceError(msg("judge.bad_file", path=path, line=number, error=error)) from None
        answers = data.get("answers") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(data.get("prompt"), str) or not isinstance(answers, dict) \
                or not all(isinstance(v, str) for v in answers.values()):
            raise JudgeSourceError(msg("judge.bad_file", path=path, line=number,
                                       error='expected {"prompt": "...", "answers": {"name": "..."}}'))
        rows.append(JudgeRow(data["prompt"], dict(answers), str(data.get("reference") or ""), "file"))
    return rows


def vote_rows(run_dir: Path) -> list[JudgeRow]:
    """One row per vote on two answers that followed the same conversation (the pairs the judge can
    be compared with); ties kept, as the judge may say tie too."""
    rows = []
    for vote in read_preferences(run_dir)["votes"]:
        candidates, answers = vote.get("candidates", []), vote.get("answers")
        if len(candidates) != 2 or not isinstance(answers, dict) or not all(answers.get(c) for c in candidates):
            continue
        contexts = answer_contexts(vote)
        first, second = (contexts.get(c) for c in candidates)
        if first is None or first != second:
            continue  # each answer followed its own earlier turns: not the same request
        rows.append(JudgeRow(conversation_text(first), {c: answers[c] for c in candidates}, "", "vote",
                             vote=vote["winner"], meta={"candidates": list(candidates)}))
    return rows


def rows_for(source: str, run_dir: Path, names: list[str], path: Path | None = None) -> list[JudgeRow]:
    """The rows of `source` that hold an answer of every checkpoint in `names`; JudgeSourceError when none."""
    if source in ("learning", "identity"):
        rows = learning_rows(run_dir, identity_only=source == "identity")
    elif source == "predictions":
        rows = prediction_rows(run_dir, names)
    elif source == "file":
        rows = file_rows(path)
    else:
        rows = vote_rows(run_dir)
    if source == "votes" and not rows:
        raise JudgeSourceError(msg("judge.no_votes", run=Path(run_dir).name))
    kept = [row for row in rows if all(name in row.answers for name in names)] if source != "votes" else rows
    if not kept:
        raise JudgeSourceError(msg("judge.no_rows", source=source, names=", ".join(names) or "-",
                                   run=Path(run_dir).name, found=len(rows)))
    return kept
