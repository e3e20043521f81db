"""Checks on structured answers: json (parses; has the given keys; or validates against a JSON
Schema) and number (within a tolerance of the expected value).

An answer's JSON may sit inside a ``` (or ```json) fence, as models write it. A number answer is
read as exact_match reads it: the last <answer> tag's content when there is one, and in it (or in
the whole answer) the last number, 1,000 spelled with or without its comma.
"""

from __future__ import annotations

import json
import re
from typing import Any

from backend.messages import Message, msg
from backend.scoring.errors import ScorerError, flag_field, is_finite_number
from backend.scoring.items import Item, Score
from backend.scoring.text_match import ANSWER_TAG, NUMBER

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
_MISSING = object()


def json_value(text: str) -> Any:
    """`text` as JSON (inside a ``` fence or not), else _MISSING."""
    text = text.strip()
    fenced = _FENCE.match(text)
    try:
        return json.loads(fenced.group(1) if fenced else text)
    except ValueError:
        return _MISSING


def json_object(text: str) -> dict | None:
    """`text` as a JSON object, else None."""
    value = json_value(text)
    return value if isinstance(value, dict) else None


def build_json(spec: dict, where: Message):
    keys, schema = spec.get("keys"), spec.get("schema")
    if keys is not None and (not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys)):
        raise ScorerError(msg("scoring.json_keys", where=where, value=keys))
    validator = _validator(schema, where) if schema is not None else None

    def check(item: Item) -> Score:
        value = json_value(item.text)
        if value is _MISSING:
            return Score.of(False)
        if keys is not None and not (isinstance(value, dict) and set(keys) <= set(value)):
            return Score.of(False)
        return Score.of(validator is None or validator.is_valid(value))
    return check, False


def _validator(schema: Any, where: Message):
    """A JSON Schema validator of the schema's own draft (2020-12 when it names none)."""
    import jsonschema

    if not isinstance(schema, (dict, bool)):
        raise ScorerError(msg("scoring.schema_type", where=where, value=schema))
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as error:
        raise ScorerError(msg("scoring.schema", where=where, error=error.message)) from None
    return cls(schema)


def last_number(text: str) -> float | None:
    """The last number of the answer (inside its last <answer> tag when it has one)."""
    tagged = ANSWER_TAG.findall(text)
    found = NUMBER.findall(tagged[-1] if tagged else text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def build_number(spec: dict, where: Message):
    """Right when |answer - expected| <= tolerance (relative: tolerance x |expected|). `value`: the
    expected number; left out, the reference answer's number."""
    tolerance, expected = spec.get("tolerance", 0), spec.get("value")
    if not is_finite_number(tolerance) or tolerance < 0:
        raise ScorerError(msg("scoring.tolerance", where=where, value=tolerance))
    if expected is not None and not is_finite_number(expected):
        raise ScorerError(msg("scoring.number_value", where=where, value=expected))
    relative = flag_field(spec, "relative", where, "number")

    def check(item: Item) -> Score:
        want = float(expected) if expected is not None else last_number(str(item.reference))
        got = last_number(item.text)
        if want is None or got is None:
            return Score.of(False)
        # + 1e-12: a float spelling (0.1 + 0.2 = 0.30000000000000004) is not a miss at tolerance 0
        return Score.of(abs(got - want) <= float(tolerance) * (abs(want) if relative else 1.0) + 1e-12)
    return check, expected is None
