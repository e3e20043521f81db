"""The Data tab in a real browser: upload identity.json, read the report,
fix it and save it as a workspace dataset."""

from __future__ import annotations

import json
import re

import pytest

from tests.browser.harness import REPO, screenshot, wait_app_loaded

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


@pytest.mark.browser
def test_upload_report_fix_and_save(app, page, shared_data):
    identity = shared_data / "identity.json"
    placeholder, conflicting = expected_counts(identity)
    page.goto(app.url, wait_until="domcontentloaded")
    wait_app_loaded(page)

    page.locator("#data-upload input[type=file]").set_input_files(str(identity))
    status = page.locator("#data-status")
    status.get_by_text("alpaca", exact=False).wait_for(timeout=ANALYSIS_MS)
    # {{name}} / {{author}} are the Train form's to fill: no placeholder left, the rows shown filled.
    assert page.locator("#data-fix-fill").inner_text() == "Fill placeholders (0)"
    assert f"Train fills these in {placeholder} rows" in status.inner_text()
    assert page.locator("#data-fix-conflicts_drop").inner_text().endswith(f"({conflicting})")
    page.locator("#data-histogram .js-plotly-plot").wait_for()

    # Click a check in the summary table: its rows appear as conversations.
    page.locator("#data-summary span").get_by_text("conflicting_answers", exact=True).first.click()
    page.locator("#data-check-rows").get_by_text("Same prompt, different answers").wait_for()
    assert page.locator("#data-check-rows .ft-conv").count() == conflicting
    screenshot(page, "data-report", also_to=REPO / "docs" / "screenshots" / "data.png")

    page.locator("#data-fix-conflicts_drop").click()
    page.locator("#data-applied").get_by_text("conflicts", exact=False).wait_for(timeout=ANALYSIS_MS)
    preview = page.locator("#data-preview").inner_text()
    assert "Nova" in preview and "{{name}}" not in preview  # the Train form's default identity_name

    page.locator("#data-save-name textarea, #data-save-name input").first.fill("identity-clean")
    page.locator("#data-save").click()
    page.locator("#data-saved").get_by_text("Saved workspace dataset", exact=False).wait_for(timeout=ANALYSIS_MS)
    screenshot(page, "data-saved")

    meta = json.loads((app.workspace / "datasets" / "identity-clean" / "meta.json").read_text())
    assert [f["id"] for f in meta["fixes"]] == ["conflicts"]  # the placeholders stay: Train fills them
    assert meta["rows_after"] == meta["rows_before"] - conflicting
    assert json.loads((app.workspace / "settings.json").read_text())["dataset"] == "identity-clean"
