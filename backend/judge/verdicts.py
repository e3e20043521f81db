"""Reading the verdict out of a judge's answer. The templates ask for a last
line "Verdict: A|B|tie" or "Grade: N"; a small judge often answers with the
bare letter or number instead, which is read too. Anything else is
unparsed (None): counted, asked once more, and shown in the result."""

from __future__ import annotations

import re

A, B, TIE = "A", "B", "tie"
_VERDICT = re.compile(r"verdict\s*[:：]?\s*\**\s*(A|B|tie)\b", re.IGNORECASE)
_BARE_VERDICT = re.compile(r"^\W*(A|B|tie)\W*$", re.IGNORECASE)
_LEADING_VERDICT = re.compile(r"^\W*(?:answer\s+)?(A|B)\b[\s.:)]", re.IGNORECASE)
_GRADE = re.compile(r"(?:grade|score)\s*[:：]?\s*\**\s*([1-5])(?:\s*/\s*5)?\b", re.IGNORECASE)
_BARE_GRADE = re.compile(r"^\W*([1-5])(?:\s*/\s*5)?\W*$")


def _label(text: str) -> str:
    return TIE if text.lower() == "tie" else text.upper()


def parse_pairwise(answer: str) -> tuple[str | None, str]:
    """(A, B, tie or None, the reason: the answer without its verdict line)."""
    text = (answer or "").strip()
    found = _VERDICT.findall(text)
    if found:
        reason = text[:text.lower().rfind("verdict")].strip()
        return _label(found[-1]), reason
    if _BARE_VERDICT.match(text):
        return _label(_BARE_VERDICT.match(text).group(1)), ""
    leading = _LEADING_VERDICT.match(text + " ")
    if leading:
        return _label(leading.group(1)), text
    return None, text


def parse_grade(answer: str) -> tuple[int | None, str]:
    """(1-5 or None, the reason)."""
    text = (answer or "").strip()
    found = _GRADE.findall(text)
    if found:
        reason = text[:max(text.lower().rfind("grade"), text.lower().rfind("score"))].strip()
        return int(found[-1]), reason
    bare = _BARE_GRADE.match(text)
    if bare:
        return int(bare.group(1)), ""
    return None, text


def swap(verdict: str | None) -> str | None:
    """A verdict on the swapped order, in the first order's letters (A <-> B, tie and None stay)."""
    return {A: B, B: A}.get(verdict, verdict)
