"""Checks on the answer's text: exact_match, contains / not_contains, regex and format.

exact_match compares with GRPO's normalisation by default (`normalise: answer`): the text inside
the last <answer>...</answer> when there is one, else the last number where the reference is a
number, else the whole answer; case, spaces, a final full stop and number spelling (1,000 / 1000.0)
do not count. `normalise: spaces` compares the whole answer with only surrounding and repeated
whitespace ignored (Evaluate's exact_match column: a sentence answer stays a sentence).
"""

from __future__ import annotations

import re

from backend.messages import Message, msg
from backend.scoring.errors import ScorerError, flag_field, pattern_field, text_field
from backend.scoring.items import Item, Score

# The format check's default: reasoning in <think>, then the answer in <answer>.
THINK_ANSWER = r"<think>.*?</think>\s*<answer>.*?</answer>"
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
NORMALISATIONS = ("answer", "spaces")


def normalise(text: str) -> str:
    """An answer as compared: stripped, spaces collapsed, case folded, a number in one spelling."""
    text = " ".join(str(text).split()).casefold().rstrip(".")
    plain = text.replace(",", "")
    try:
        number = float(plain)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else repr(number)


def normalise_spaces(text: str) -> str:
    """For the whole-text match: surrounding and repeated whitespace do not count."""
    return " ".join(str(text).split())


def extract_answer(text: str, reference: str | None = None) -> str:
    """The part of `text` that is compared: the last <answer> tag's content, else the last number
    where the reference is a number, else all of it."""
    tagged = ANSWER_TAG.findall(text)
    if tagged:
        return tagged[-1]
    if reference is not None and NUMBER.fullmatch(normalise(reference)):
        numbers = NUMBER.findall(text)
        return numbers[-1] if numbers else text
    return text


def answers_match(text: str, reference: str) -> bool:
    """GRPO's exact match: the extracted answer equals the reference, both normalised."""
    return normalise(extract_answer(text, reference)) == normalise(reference)


def same_text(text: str, reference: str) -> bool:
    return normalise_spaces(text) == normalise_spaces(reference)


def build_exact_match(spec: dict, where: Message):
    way = spec.get("normalise", "answer")
    if way not in NORMALISATIONS:
        raise ScorerError(msg("scoring.normalise", where=where, value=way, allowed=", ".join(NORMALISATIONS)))
    same = answers_match if way == "answer" else same_text
    return (lambda item: Score.of(same(item.text, str(item.reference)))), True


def build_contains(spec: dict, where: Message, wanted: bool = True):
    kind = "contains" if wanted else "not_contains"
    text = text_field(spec, "text", where, kind)
    ignore_case = flag_field(spec, "ignore_case", where, kind)
    needle = text.casefold() if ignore_case else text

    def check(item: Item) -> Score:
        haystack = item.text.casefold() if ignore_case else item.text
        return Score.of((needle in haystack) == wanted)
    return check, False


def build_not_contains(spec: dict, where: Message):
    return build_contains(spec, where, wanted=False)


def build_regex(spec: dict, where: Message):
    """The pattern found anywhere in the answer (DOTALL: `.` crosses lines)."""
    pattern = pattern_field(spec, where, "regex")
    return (lambda item: Score.of(pattern.search(item.text) is not None)), False


def build_format(spec: dict, where: Message):
    """The whole answer, stripped, matches the pattern (default: <think>...</think><answer>...</answer>)."""
    pattern = pattern_field(spec, where, "format", default=THINK_ANSWER)
    return (lambda item: Score.of(pattern.fullmatch(item.text.strip()) is not None)), False
