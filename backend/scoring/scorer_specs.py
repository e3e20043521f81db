"""The scorer spec: plain data naming a kind and its settings, `{"kind": "number", "tolerance": 0.01}`,
parsed once into a Scorer (items.py) or refused with one ScorerError sentence.

A list of specs is text too (the evaluate command line, the Evaluate tab, a YAML file): YAML or JSON,
a list of mappings or `{scorers: [...]}`. Each scorer is named by its `name`, else its kind (a kind
that repeats gets _2, _3 ..., the rule GRPO logs its rewards under).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from backend.messages import Message, msg
from backend.scoring.answer_rule import build_right_answer
from backend.scoring.errors import ScorerError
from backend.scoring.items import Scorer
from backend.scoring.length_bounds import build_length
from backend.scoring.overlap import build_bleu, build_rouge_l
from backend.scoring.structured import build_json, build_number
from backend.scoring.text_match import build_contains, build_exact_match, build_format, build_not_contains, build_regex

# kind -> (the keys it takes beside kind, its builder: (spec, where) -> (check, needs_reference)).
KINDS: dict[str, tuple[tuple[str, ...], Callable]] = {
    "exact_match": (("normalise",), build_exact_match),
    "format": (("pattern",), build_format),
    "length": (("min", "max"), build_length),
    "contains": (("text", "ignore_case"), build_contains),
    "not_contains": (("text", "ignore_case"), build_not_contains),
    "regex": (("pattern",), build_regex),
    "json": (("keys", "schema"), build_json),
    "number": (("tolerance", "value", "relative"), build_number),
    "rouge_l": (("threshold",), build_rouge_l),
    "bleu": (("threshold",), build_bleu),
    "right_answer": ((), build_right_answer),
}
SCORER_FILE_SUFFIXES = (".yaml", ".yml", ".json")


def where_of(number: int) -> Message:
    return msg("scoring.where", number=number)


def parse_scorer(spec: Any, where: Message | None = None, name: str | None = None,
                 kinds: Iterable[str] | None = None, beside: tuple[str, ...] = ("name",)) -> Scorer:
    """`spec` as a Scorer. `where` names it in a refusal ("scorer 1"); `kinds`: the kinds this caller
    takes (GRPO: its presets); `beside`: the caller's own keys next to kind (GRPO: weight)."""
    where = where or where_of(1)
    if not isinstance(spec, dict):
        raise ScorerError(msg("scoring.not_mapping", where=where, got=_short(spec)))
    allowed = tuple(kinds) if kinds is not None else tuple(KINDS)
    kind = spec.get("kind")
    if kind not in allowed:
        raise ScorerError(msg("scoring.unknown_kind", where=where, kind=kind, allowed=", ".join(allowed)))
    keys, build = KINDS[kind]
    unknown = sorted(str(k) for k in set(spec) - {"kind", *beside, *keys})
    if unknown:
        raise ScorerError(msg("scoring.keys", where=where, kind=kind, keys=", ".join(unknown),
                              allowed=", ".join((*beside, *keys)) or "nothing else"))
    check, needs_reference = build(spec, where)
    return Scorer(kind=kind, name=name or kind, spec=dict(spec), needs_reference=needs_reference, check=check)


def scorer_names(specs: list[dict]) -> list[str]:
    """Each spec's name: its `name`, else its kind (_2, _3 ... where a kind repeats)."""
    names, seen = [], {}
    for spec in specs:
        kind = spec.get("kind")
        seen[kind] = seen.get(kind, 0) + 1
        names.append(spec.get("name") or (kind if seen[kind] == 1 else f"{kind}_{seen[kind]}"))
    return names


def parse_scorers(specs: Any) -> list[Scorer]:
    """A list of specs (or {scorers: [...]}) as Scorers with their names; [] for none."""
    if specs is None:
        return []
    if isinstance(specs, dict) and set(specs) == {"scorers"}:
        specs = specs["scorers"]
    if not isinstance(specs, list):
        raise ScorerError(msg("scoring.not_list", got=_short(specs)))
    for number, spec in enumerate(specs, 1):
        given = spec.get("name") if isinstance(spec, dict) else None
        if given is not None and (not isinstance(given, str) or not given.strip()):
            raise ScorerError(msg("scoring.name", where=where_of(number), value=given))
    names = scorer_names([s if isinstance(s, dict) else {} for s in specs])
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ScorerError(msg("scoring.same_name", name=repeated[0]))
    return [parse_scorer(spec, where_of(number), name) for number, (spec, name) in enumerate(zip(specs, names), 1)]


def specs_from_text(text: str | None) -> list[dict]:
    """Scorer specs typed as YAML or JSON (JSON is YAML); checked, as plain data. Empty text: none."""
    if not text or not text.strip():
        return []
    try:
        specs = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ScorerError(msg("scoring.yaml", error=" ".join(str(error).split()))) from None
    if isinstance(specs, dict) and set(specs) == {"scorers"}:
        specs = specs["scorers"]
    parse_scorers(specs)
    return specs or []


def specs_from_argument(value: str | None) -> list[dict]:
    """The evaluate command line's --scorers: a .yaml / .yml / .json file, else the specs as text."""
    if not value:
        return []
    if value.strip().lower().endswith(SCORER_FILE_SUFFIXES):
        try:
            text = Path(value).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ScorerError(msg("scoring.file", path=value, error=error)) from None
        return specs_from_text(text)
    return specs_from_text(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
