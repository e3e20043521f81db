"""The judge's prompts: plain text templates a user reads, edits and saves as a
file (`--judge-prompt FILE`, `--print-judge-prompts` shows these defaults).

A template names its blanks in braces; only the blanks below are filled, by
plain replacement, so any other brace a user writes (a JSON example) stays
as written. The last line asks for the verdict in a form verdicts.py reads.

Rubrics grade on a 1-5 scale; a rubric is a text whose lines give each
grade from 1 to 5 ("1: ...", "5 - ..."), so a person and the judge read the
same scale. One default per task kind:

* facts: short factual answers (who, what, when; the identity prompts):
  right and complete against the reference;
* format: answers that must follow a shape (JSON, a list, a length): the
  shape first, then the content;
* free_text: open answers (explain, write, advise): helpful, correct, clear.
"""

from __future__ import annotations

import re
from pathlib import Path

from backend.messages import UserError, msg

PAIRWISE_BLANKS = ("{prompt}", "{reference}", "{answer_a}", "{answer_b}")
GRADED_BLANKS = ("{prompt}", "{reference}", "{answer}", "{rubric}")
NO_REFERENCE = "(none given)"

PAIRWISE_TEMPLATE = """You are judging two answers to the same request. Decide which answer is better: more correct, \
more helpful and closer to the reference answer when one is given. Length is not quality. If they are equally good \
or equally bad, say tie.

[Request]
{prompt}

[Reference answer]
{reference}

[Answer A]
{answer_a}

[Answer B]
{answer_b}

Give one or two sentences of reason, then a last line that is exactly one of:
Verdict: A
Verdict: B
Verdict: tie"""

GRADED_TEMPLATE = """You are grading one answer to a request on a 1-5 scale.

[Rubric]
{rubric}

[Request]
{prompt}

[Reference answer]
{reference}

[Answer]
{answer}

Give one or two sentences of reason, then a last line "Grade: N" with N from 1 to 5."""

RUBRICS = {
    "facts": """1: wrong, or does not answer the question
2: partly wrong, or the right fact buried in wrong ones
3: right but incomplete or vague
4: right and complete, with small faults (extra words, a minor slip)
5: right, complete and direct, matching the reference""",
    "format": """1: ignores the required format
2: attempts the format but breaks it (unparseable, wrong shape)
3: the format holds but the content is weak or wrong
4: the format holds and the content is mostly right
5: the exact format asked for, with right content""",
    "free_text": """1: unhelpful, off topic or harmful
2: on topic but mostly wrong or confusing
3: helpful in part, with gaps or errors
4: helpful and correct, with minor gaps
5: helpful, correct, clear and complete""",
}
DEFAULT_KIND = "free_text"
SCALE_LINE = re.compile(r"^\s*([1-5])\s*(?:[:.)=\-–—]|points?\b)", re.MULTILINE)


class JudgeTemplateError(UserError, ValueError):
    """A template or rubric that cannot be used; the message says what is missing."""


def fill(template: str, **values: str) -> str:
    """`template` with each known blank replaced (an empty reference reads NO_REFERENCE)."""
    text = template
    for name, value in values.items():
        if name == "reference" and not (value or "").strip():
            value = NO_REFERENCE
        text = text.replace("{" + name + "}", value or "")
    return text


def check_template(template: str, mode: str, source: str) -> str:
    """The template, or JudgeTemplateError naming the blanks it lacks (the answers and the request)."""
    needed = PAIRWISE_BLANKS if mode == "pairwise" else GRADED_BLANKS
    missing = [blank for blank in needed if blank != "{reference}" and blank not in template]
    if missing:
        raise JudgeTemplateError(msg("judge.template_blanks", source=source, missing=" ".join(missing),
                                     needed=" ".join(needed)))
    return template


def check_rubric(rubric: str, source: str) -> str:
    """The rubric, or JudgeTemplateError when it does not give every grade from 1 to 5 on its own line."""
    grades = set(SCALE_LINE.findall(rubric or ""))
    missing = [g for g in "12345" if g not in grades]
    if missing:
        raise JudgeTemplateError(msg("judge.no_scale", source=source, missing=", ".join(missing)))
    return rubric


def rubric_for(kind: str | None = None, path: Path | None = None) -> str:
    """The rubric of `path` (checked for its scale) or the default of task kind `kind`."""
    if path is not None:
        return check_rubric(read_text(path), str(path))
    kind = kind or DEFAULT_KIND
    if kind not in RUBRICS:
        raise JudgeTemplateError(msg("judge.unknown_kind", kind=kind, kinds=", ".join(RUBRICS)))
    return RUBRICS[kind]


def read_text(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise JudgeTemplateError(msg("judge.unreadable", path=path, error=error)) from None


def printable_defaults() -> str:
    """The default templates and rubrics as one text (`--print-judge-prompts`)."""
    parts = ["# pairwise template", PAIRWISE_TEMPLATE, "", "# graded template", GRADED_TEMPLATE]
    for kind, rubric in RUBRICS.items():
        parts += ["", f"# rubric: {kind}", rubric]
    return "\n".join(parts) + "\n"
