"""What the Data tab must report for ../shared/data/identity.json, counted
independently of the data backend (the journey in test_journey.py uploads it)."""

from __future__ import annotations

import json
import re

ANALYSIS_MS = 120_000  # the first check loads the tokenizer libraries in the app process


def expected_counts(path) -> tuple[int, int]:
    """Independent counts: rows with a {{placeholder}}; rows whose prompt has several distinct answers."""
    rows = json.loads(path.read_text(encoding="utf-8"))
    placeholder = sum(1 for r in rows if re.search(r"\{\{[^{}]+\}\}", json.dumps(r, ensure_ascii=False)))
    answers: dict[tuple, set] = {}
    for r in rows:
        answers.setdefault((r["instruction"].strip(), r["input"].strip()), set()).add(r["output"].strip())
    conflicting = sum(1 for r in rows if len(answers[(r["instruction"].strip(), r["input"].strip())]) > 1)
    return placeholder, conflicting
