"""The checks: id, severity, title and the fix that answers each one."""

from __future__ import annotations

from backend.data.checks.report import CheckSpec

SPECS = [
    CheckSpec("schema", "error", "Rows that cannot be used (unreadable, missing field, wrong type)",
              "Fix these rows in the file; until then they are left out of training"),
    CheckSpec("empty_field", "error", "Empty or whitespace-only instruction, output or message",
              "Drop them: fix --drop-empty"),
    CheckSpec("placeholder", "error", "Unfilled template placeholders such as {{name}}",
              "Fill them: fix --fill name=VALUE (one per placeholder)"),
    CheckSpec("response_cut", "error", "The cutoff removes every response token: the row trains on nothing",
              "Drop them (fix --over-cutoff drop) or raise cutoff_len"),
    CheckSpec("over_cutoff", "warning", "Longer than cutoff_len tokens (cut in training)",
              "Raise cutoff_len, or fix --over-cutoff drop|truncate"),
    CheckSpec("duplicate", "warning", "Rows identical to an earlier row",
              "Drop them, keeping the first: fix --drop-duplicates"),
    CheckSpec("near_duplicate", "warning", "Rows identical to an earlier row after folding case, whitespace and punctuation",
              "Drop them, keeping the first: fix --drop-near-duplicates"),
    CheckSpec("conflicting_answers", "warning", "Same prompt, different answers",
              "Keep one answer per prompt (fix --conflicts keep-first) or drop the groups (--conflicts drop)"),
    CheckSpec("html", "warning", "HTML tags or entities", "Strip them: fix --strip-html (not for data about HTML)"),
    CheckSpec("control_chars", "warning",
              "Control, zero-width or U+FFFD replacement characters, or lone surrogates",
              "Remove them: fix --remove-control-chars"),
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
PAIR_SPECS = [
    CheckSpec("schema", "error", "Rows that cannot be used (unreadable, missing field, wrong type)",
              "Fix these rows in the file; until then they are left out of training"),
    CheckSpec("empty_answer", "error", "Empty chosen, rejected or completion answer",
              "Drop them: fix --drop-empty"),
    CheckSpec("same_answer", "error", "chosen is the same as rejected: the pair teaches nothing",
              "Drop them: fix --drop-identical-pairs"),
    CheckSpec("contradicting_pair", "warning", "Same prompt and answers, opposite preferences (A over B and B over A)",
              "Drop the contradicting rows (fix --conflicts drop) or keep the first (--conflicts keep-first)"),
    CheckSpec("over_cutoff", "warning", "Prompt + the longer answer over cutoff_len tokens (cut in training)",
              "Raise cutoff_len, or shorten the prompts"),
    CheckSpec("length_bias", "info", "Pairs whose chosen answer is longer than the rejected one",
              "Far above half: the model may learn that longer is better; balance the set"),
]

BY_ID = {spec.id: spec for spec in SPECS + PAIR_SPECS}
TOKEN_CHECKS = ("over_cutoff", "response_cut")
MIN_RESPONSE_CHARS = 3
OUTLIER_IQR = 3.0

# Check id -> the FixPlan field (and `fix` flag) that answers it, for the UI's fix buttons.
FIX_FOR_CHECK = {
    "empty_field": "drop_empty",
    "placeholder": "fill",
    "response_cut": "over_cutoff",
    "over_cutoff": "over_cutoff",
    "duplicate": "drop_duplicates",
    "near_duplicate": "drop_near_duplicates",
    "conflicting_answers": "conflicts",
    "html": "strip_html",
    "control_chars": "remove_control_chars",
    # preference data (backend/data/checks/pairs.py)
    "empty_answer": "drop_empty",
    "same_answer": "drop_identical_pairs",
    "contradicting_pair": "conflicts",
}
