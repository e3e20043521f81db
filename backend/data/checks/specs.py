"""The checks: id, severity, title and what to do about each one. Where a fix
answers a check, its hint names it as the fix table (backend/data/fix_table.py)
spells it: `{fix}` in a hint becomes e.g. "fix --drop-duplicates"."""

from __future__ import annotations

import dataclasses

from backend.data.checks.report import CheckSpec
from backend.data.fix_table import hint_fix

_SPECS = [
    CheckSpec("schema", "error", "Rows that cannot be used (unreadable, missing field, wrong type)",
              "Fix these rows in the file; until then they are left out of training"),
    CheckSpec("empty_field", "error", "Empty or whitespace-only instruction, output or message",
              "Drop them: {fix}"),
    CheckSpec("placeholder", "error", "Unfilled template placeholders such as {{name}}",
              "Fill them: {fix} (one per placeholder)"),
    CheckSpec("identity_fill", "info", "{{name}} / {{author}} that Train fills from identity_name / identity_author",
              "Nothing to do: Train fills them from identity_name / identity_author (the Train form's fields; "
              "--identity-name / --identity-author here); the other checks see the filled rows"),
    CheckSpec("response_cut", "error", "The cutoff removes every response token: the row trains on nothing",
              "Raise cutoff_len, or {fix}"),
    CheckSpec("over_cutoff", "warning", "Longer than cutoff_len tokens (cut in training)",
              "Raise cutoff_len, or {fix}"),
    CheckSpec("duplicate", "warning", "Rows identical to an earlier row",
              "Drop them, keeping the first: {fix}"),
    CheckSpec("near_duplicate", "warning", "Rows identical to an earlier row after folding case, whitespace and punctuation",
              "Drop them, keeping the first: {fix}"),
    CheckSpec("conflicting_answers", "warning", "Same prompt, different answers",
              "Keep one answer per prompt or drop the groups: {fix}"),
    CheckSpec("html", "warning", "HTML tags or entities", "Strip them (not for data about HTML): {fix}"),
    CheckSpec("control_chars", "warning",
              "Control, zero-width or U+FFFD replacement characters, or lone surrogates",
              "Remove them: {fix}"),
    CheckSpec("short_response", "info", "Very short responses (under 3 characters)",
              "Check they are real answers; drop the row in the file otherwise"),
    CheckSpec("length_outlier", "info", "Far longer than the rest (characters above Q3 + 3 x IQR)",
              "Look at them: often pasted documents or broken exports"),
    CheckSpec("language_mix", "info", "Prompt and response in different scripts, or a script unlike the rest of the set",
              "Fine for translation data; otherwise check these rows"),
    CheckSpec("empty_input", "info", "alpaca rows with an empty input (normal: the instruction stands alone)",
              "Nothing to do"),
]

# Preference data (backend/data/checks/pairs.py): its own list, in the same report.
_PAIR_SPECS = [
    CheckSpec("schema", "error", "Rows that cannot be used (unreadable, missing field, wrong type)",
              "Fix these rows in the file; until then they are left out of training"),
    CheckSpec("empty_answer", "error", "Empty chosen, rejected or completion answer",
              "Drop them: {fix}"),
    CheckSpec("same_answer", "error", "chosen is the same as rejected: the pair teaches nothing",
              "Drop them: {fix}"),
    CheckSpec("contradicting_pair", "warning", "Same prompt and answers, opposite preferences (A over B and B over A)",
              "Drop the contradicting rows: {fix}"),
    CheckSpec("prompt_fills_cutoff", "error", "The prompt alone fills cutoff_len: training leaves the pair out",
              "Raise cutoff_len to what the detail says fits, or shorten the prompts (earlier turns)"),
    CheckSpec("over_cutoff", "warning", "Prompt + the longer answer over cutoff_len tokens (cut in training)",
              "Raise cutoff_len, or shorten the prompts"),
    CheckSpec("length_bias", "info", "Pairs whose chosen answer is longer than the rejected one",
              "Far above half: the model may learn that longer is better; balance the set"),
]


# overflow: drop (RunConfig) makes the worker leave over-long rows out instead of cutting them
# (backend/training/dataset.py): the same check, in the words of that setting.
_OVER_CUTOFF_DROP = CheckSpec("over_cutoff", "warning", "Longer than cutoff_len tokens (left out of training: overflow drop)",
                              "Raise cutoff_len, set overflow to truncate to train on their start, or {fix}",
                              text_id="over_cutoff_drop")


def _with_fix(spec: CheckSpec) -> CheckSpec:
    return dataclasses.replace(spec, hint=spec.hint.replace("{fix}", hint_fix(spec.id)))


SPECS = [_with_fix(spec) for spec in _SPECS]
PAIR_SPECS = [_with_fix(spec) for spec in _PAIR_SPECS]
BY_ID = {spec.id: spec for spec in SPECS + PAIR_SPECS}


def specs_for(overflow: str = "truncate") -> list[CheckSpec]:
    """The instruction-row checks in the words of what the worker does with over-long rows."""
    if overflow == "drop":
        return [_with_fix(_OVER_CUTOFF_DROP) if spec.id == "over_cutoff" else spec for spec in SPECS]
    return SPECS
TOKEN_CHECKS = ("over_cutoff", "response_cut")
MIN_RESPONSE_CHARS = 3
OUTLIER_IQR = 3.0

