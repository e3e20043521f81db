"""Merge verification: equal, 16-bit rounding tie and differ are counted apart; only
all-equal answers pass; ties keep the export (explained), any other difference holds it back."""

from __future__ import annotations

import json

import pytest

from backend.export.exporter import REPORT_FILE, _finish
from backend.export.outputs import BaseModel, ExportError
from backend.export.verify import compare_row, judge

EQUAL = compare_row("q1", "Paris.", "Paris.", None)
TIE = compare_row("q2", "It is Paris.", "It was Paris.", (0.05, 12.0))   # gap 0.4% of the top logit
DIFFER = compare_row("q3", "Paris.", "Berlin.", (3.0, 12.0))            # gap 25% of the top logit
BASE = BaseModel("Org/Base", None, "Org/Base")
UNMEASURED = compare_row("q4", "Paris.", "Paris is big.", None)          # fp32: no tie is possible


def test_each_outcome_is_named_and_counted_apart():
    assert [r["outcome"] for r in (EQUAL, TIE, DIFFER, UNMEASURED)] == ["equal", "tie", "differ", "differ"]
    result = judge([EQUAL, TIE, DIFFER])
    assert (result["equal"], result["rounding_ties"], result["differ"], result["total"]) == (1, 1, 1, 3)
    assert result["summary"].startswith("1 of 3 greedy answers of the exported model equal the checkpoint's, "
                                        "1 differ after a 16-bit rounding tie, 1 differ otherwise.")


def test_only_equal_answers_pass_and_ties_are_explained():
    assert judge([EQUAL, EQUAL])["passed"] and judge([EQUAL, EQUAL])["verdict"] == "passed"
    ties = judge([EQUAL, TIE])
    assert not ties["passed"] and ties["verdict"] == "ties"
    assert "rounding tie: where the answers part" in ties["summary"] and "fp32" in ties["summary"]
    assert judge([EQUAL, TIE, DIFFER])["verdict"] == "failed"
    assert "rounding tie:" not in judge([EQUAL, DIFFER])["summary"]


@pytest.mark.parametrize(("rows", "kept"), [([EQUAL, TIE], True), ([EQUAL, DIFFER], False)])
def test_ties_keep_the_export_and_a_difference_holds_it_back(tmp_path, rows, kept):
    staging, out = tmp_path / ".merged.partial", tmp_path / "merged"
    staging.mkdir()
    report = {"kind": "merged", "verification": judge(rows), "notes": []}
    if kept:
        _finish(staging, out, report, tmp_path / "final", None, None, BASE, require_verified=True)
    else:
        with pytest.raises(ExportError, match="Verification failed: 1 of 2 .* 1 differ otherwise"):
            _finish(staging, out, report, tmp_path / "final", None, None, BASE, require_verified=True)
        out = tmp_path / "merged.failed-verification"
    assert (out / REPORT_FILE).is_file() and not staging.exists()
    card = (out / "README.md").read_text(encoding="utf-8")
    saved = json.loads((out / REPORT_FILE).read_text(encoding="utf-8"))["verification"]
    assert saved["passed"] is False
    assert ("Verification not passed (16-bit rounding ties only)" in card) == kept
