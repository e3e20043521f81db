"""The data session (backend/data/prepare.py) reads a file once; the Data tab
turns pages, shows a check's rows, applies fixes and saves from the rows it
holds, without reading or checking the file again."""

from __future__ import annotations

import hashlib
import json

import pytest

from backend.data.checks import check_file
from backend.data.fixes import FixPlan
from backend.data.prepare import DataSession
from ui import data_session as ds
from ui.context import UIContext
from ui.i18n import build_i18n, merge_texts
from ui.shell import TEXT as SHELL_TEXT
from ui.tabs import data


@pytest.fixture
def ctx(workspace):
    texts = merge_texts(SHELL_TEXT, data.TEXT)
    return UIContext(workspace=workspace, texts=texts, i18n=build_i18n(texts))


def _rows(n: int) -> list[dict]:
    """n distinct rows, row 3 repeated at the end (a duplicate), then a row without output (a schema error)."""
    rows = [{"instruction": f"Question {i}?", "input": "", "output": f"Answer {i}."} for i in range(n)]
    return [*rows, dict(rows[3]), {"instruction": "no answer"}]


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(_rows(12)), encoding="utf-8")
    return path


def test_the_report_without_fixes_is_the_check_commands(sample):
    session = DataSession(sample)
    analysis = session.analyse()
    assert analysis.report == check_file(sample).to_dict(all_rows=True)
    assert analysis.total == 14 and len(analysis.rows) == 13 and [r.index for r in analysis.rejected] == [13]
    assert analysis.source_meta["sha256"] == hashlib.sha256(sample.read_bytes()).hexdigest()
    assert analysis.file_columns == ["instruction", "input", "output"]


def test_fixes_and_checks_work_from_memory_with_file_row_numbers(sample):
    session = DataSession(sample)
    sample.unlink()  # the session read it: nothing below touches the file
    fixed = session.analyse(FixPlan(drop_duplicates=True))
    assert fixed.steps == [{"id": "drop_duplicates", "params": {"keep": "first"}, "changed": 0, "removed": 1}]
    assert 12 not in fixed.indices and len(fixed.rows) == 12
    duplicate = next(c for c in fixed.report["checks"] if c["id"] == "duplicate")
    assert duplicate["count"] == 0 and fixed.report["rows"] == 14 and fixed.report["schema_rejected"] == 1
    unfixed = session.analyse()
    duplicate = next(c for c in unfixed.report["checks"] if c["id"] == "duplicate")
    assert duplicate["rows"] == [12] and duplicate["details"] == {"12": "same as row 3"}
    assert fixed.saved_steps()[0] == {"id": "drop_schema_errors", "params": {}, "changed": 0, "removed": 1}


def test_page_turns_checks_and_save_never_read_the_file_again(ctx, sample):
    digest = hashlib.sha256(sample.read_bytes()).hexdigest()
    out = data.open_upload(ctx, "en", str(sample), "", 256, None)
    state = out["state"]
    assert out["page_info"] == "Page 1 of 3 (13 rows)"
    sample.unlink()  # a page turn that read the file would now fail with "not found"
    page = data.turn_page(ctx, "en", state, 2)
    assert page["page"] == 2 and page["page_info"] == "Page 2 of 3 (13 rows)"
    assert "Question 5?" in page["preview"] and "Question 4?" not in page["preview"]
    assert data.turn_page(ctx, "en", state, 99)["page"] == 3
    assert "Question 3?" in data.show_check(ctx, "en", state, "duplicate")
    assert "文件共 14 行" in data.relabel(ctx, "zh", state)["status"]  # the language switch: same rows, new words
    fixed = data.apply_fix(ctx, "en", state, "drop_duplicates", "")
    assert "12 usable now" in fixed["status"]
    message, name = data.save_dataset(ctx, "en", fixed["state"], "sample-clean", 0.0, 1, False)
    assert name == "sample-clean", message
    meta = json.loads((ctx.workspace.datasets_dir / name / "meta.json").read_text(encoding="utf-8"))
    assert meta["source"]["sha256"] == digest and meta["rows_before"] == 14 and meta["rows_after"] == 12
    assert [f["id"] for f in meta["fixes"]] == ["drop_schema_errors", "drop_duplicates"]
    # "Check again" does read the file: gone now, it says so and keeps the state.
    again = data.recheck(ctx, "en", state, "", 256, "")
    assert set(again) == {"status"} and "sample.json" in again["status"]


def test_a_session_let_go_is_read_again(ctx, tmp_path, sample):
    state = data.open_upload(ctx, "en", str(sample), "", 256, None)["state"]
    for i in range(ds.KEEP):  # other files opened since: the first session is let go
        other = tmp_path / f"other{i}.json"
        other.write_text(json.dumps(_rows(4)), encoding="utf-8")
        data.open_upload(ctx, "en", str(other), "", 256, None)
    page = data.turn_page(ctx, "en", state, 3)
    assert page["page"] == 3 and "Question 11?" in page["preview"]
