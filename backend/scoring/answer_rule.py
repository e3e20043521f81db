"""Is one generated answer right? The learning report's rule (backend/learning/entries.py, the
learned stop), also the `right_answer` scorer; plain text in, plain data out.

A reference answer is judged by what it must carry, in this order:

* a JSON object (a format task): the answer must parse as a JSON object with
  the same keys (a code fence around it is allowed);
* key facts: the identity fields the run filled in (the name, the maker), or,
  without them, its numbers and capitalised names ("founded in 1987 by Mara
  Lind"): the answer must hold every one. Numbers match as whole numbers
  (14 is not in 1487; 1,200 is 1200);
* neither (free text, most Chinese answers): ROUGE-L F against the reference
  of at least ROUGE_RIGHT.

BLEU and ROUGE reward the form of an answer; a fine-tune that learned the
form and invented the content ("founded in 1989" for 1987) scores well on
both and is wrong, which the key-fact rule catches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from backend.messages import Message
from backend.scoring.items import Score
from backend.scoring.overlap import ROUGE_RIGHT, rouge_l
from backend.scoring.structured import json_object

_NUMBER = re.compile(r"(?<![\w.,:])\d+(?:[.,:]\d+)*(?![\w])")
# A run of capitalised words ("Mara Lind", "Blue Harbor Books"); single letters and the first
# word of a sentence alone say nothing (I, The, Our ...).
_NAME = re.compile(r"\b[A-Z][\w'&-]*(?:[ \t]+(?:of |and |the |de |van )?[A-Z][\w'&-]*)*")
_SENTENCE_START = re.compile(r"(?:^|[.!?\n]\s*)$")
_COMMON = {"I", "I'm", "I've", "I'll", "AI", "The", "A", "An", "Yes", "No", "Our", "We", "You", "It", "This",
           "That", "Hello", "Hi", "Sure", "Of", "My", "OK", "Okay", "Please", "Thank", "Thanks", "In", "On", "At",
           "If", "For", "And", "But", "Or", "As", "To"}


@dataclass
class AnswerVerdict:
    right: bool
    rule: str  # "json", "facts" or "rouge"
    facts: list[str]  # what the answer had to hold ("facts" rule)
    missing: list[str]  # the facts it lacked
    rouge_l: float  # 0-1, every rule
    parses: bool | None  # "json" rule: the answer parsed as an object with the reference's keys

    def as_dict(self) -> dict:
        return {"right": self.right, "rule": self.rule, "facts": self.facts, "missing": self.missing,
                "rouge_l": round(self.rouge_l, 4), "parses": self.parses}


def _plain_number(text: str) -> str:
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)


def key_facts(reference: str, identity: tuple[str, ...] = ()) -> list[str]:
    """What an answer must hold to be right: the identity values in `reference`, else its numbers
    and capitalised names (without repeats, in order)."""
    named = [value for value in identity if value and value.lower() in reference.lower()]
    if named:
        return named
    facts = [_plain_number(m.group(0)) for m in _NUMBER.finditer(reference)]
    for match in _NAME.finditer(reference):
        words = [w for w in match.group(0).split() if w not in _COMMON]
        if len(words) == 1 and _SENTENCE_START.search(reference[:match.start()]):
            continue  # "Today ...": one capitalised word that starts a sentence is no name
        if words and not (len(words) == 1 and len(words[0]) == 1):
            facts.append(" ".join(words))
    return list(dict.fromkeys(facts))


def _same_number(found: str, fact: str) -> bool:
    """100.0 is 100; 9:30 and 3,5 are compared as written."""
    if found == fact:
        return True
    try:
        return float(found) == float(fact)
    except ValueError:
        return False


def holds(answer: str, fact: str) -> bool:
    """`answer` holds `fact`: a number as a whole number, other text case-insensitively."""
    if re.fullmatch(r"\d+(?:[.,:]\d+)*", fact):
        return any(_same_number(_plain_number(m.group(0)), fact) for m in _NUMBER.finditer(answer))
    return fact.lower() in answer.lower()


def judge_answer(answer: str, reference: str, identity: tuple[str, ...] = ()) -> AnswerVerdict:
    """Whether `answer` carries what `reference` does (the rules in the module docstring)."""
    score = rouge_l(answer, reference)
    wanted = json_object(reference)
    if wanted is not None:
        got = json_object(answer)
        parses = got is not None and set(got) == set(wanted)
        return AnswerVerdict(parses, "json", sorted(wanted), [] if parses else sorted(set(wanted) - set(got or {})),
                         score, parses)
    facts = key_facts(reference, identity)
    if facts:
        missing = [fact for fact in facts if not holds(answer, fact)]
        return AnswerVerdict(not missing, "facts", facts, missing, score, None)
    return AnswerVerdict(score >= ROUGE_RIGHT, "rouge", [], [], score, None)


def is_right_general(answer: str, accepted: tuple[str, ...]) -> bool:
    """A general question's answer holds one of its accepted short answers."""
    return any(holds(answer, a) if a.isdigit() else a.lower() in answer.lower() for a in accepted)


def build_right_answer(spec: dict, where: Message):
    """The rule as a scorer: value 1 / 0 by its verdict (its ROUGE-L is in the verdict, not the value)."""
    return (lambda item: Score.of(judge_answer(item.text, str(item.reference), item.identity).right)), True
