"""Each checkpoint's answers graded 1-5 on a rubric, one call an answer; the
result per checkpoint is the mean grade with its sample standard deviation,
the count of each grade, and the answers whose grade could not be read
(left out of the mean, counted)."""

from __future__ import annotations

from collections import Counter

from backend.judge.asking import GRADED_REMINDER, Asker
from backend.judge.estimates import mean_spread
from backend.judge.sources import JudgeRow
from backend.judge.templates import fill
from backend.judge.verdicts import parse_grade


def grade_prompt(row: JudgeRow, name: str, template: str, rubric: str) -> tuple[str, tuple[str, ...]]:
    answer = row.answers[name]
    return fill(template, prompt=row.prompt, reference=row.reference, answer=answer, rubric=rubric), (answer,)


def planned_prompts(rows: list[JudgeRow], names: list[str], template: str, rubric: str) -> list:
    return [grade_prompt(row, name, template, rubric) for name in names for row in rows]


def judge_graded(asker: Asker, rows: list[JudgeRow], names: list[str], template: str, rubric: str) -> dict:
    checkpoints, per_row = {}, []
    for name in names:
        grades = []
        for row in rows:
            prompt, answers = grade_prompt(row, name, template, rubric)
            grade = asker.ask(prompt, answers, parse_grade, GRADED_REMINDER).verdict
            per_row.append({"checkpoint": name, "prompt": row.prompt, "answer": row.answers[name], "grade": grade})
            grades.append(grade)
        readable = [g for g in grades if g is not None]
        checkpoints[name] = {**mean_spread([float(g) for g in readable]),
                             "counts": {str(k): v for k, v in sorted(Counter(readable).items())},
                             "unparsed": len(grades) - len(readable)}
    return {"mode": "graded", "rubric": rubric, "checkpoints": checkpoints, "per_row": per_row}
