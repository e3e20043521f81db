"""Evaluate and Export tabs in a real browser: evaluate two checkpoints of a run
(table with the best marked, chart), then export the merged model, see the
verification pass, and see the report and Download again after a page refresh."""

from __future__ import annotations

import json

import pytest

from tests.browser.harness import REPO, screenshot, wait_app_loaded
from tests.eval_export_runs import checkpoint_names, copy_run

DOCS = REPO / "docs" / "screenshots"


@pytest.mark.browser
def test_evaluate_two_checkpoints_then_export_merged(workspace, short_demo_run, page):
    from tests.browser.harness import AppProcess

    run_dir = copy_run(short_demo_run, workspace, "demo-run")
    first, last = checkpoint_names(run_dir)[0], checkpoint_names(run_dir)[-1]
    with AppProcess(workspace.root) as app:
        page.goto(app.url, wait_until="domcontentloaded")
        wait_app_loaded(page)

        page.get_by_role("tab", name="Evaluate").click()
        group = page.locator("#evaluate-checkpoints")
        group.get_by_text(first, exact=True).wait_for()
        for label in ["base", *checkpoint_names(run_dir), "final"]:
            box = group.get_by_label(label, exact=True)
            if box.is_checked() != (label in (first, last)):
                box.click()
        page.locator("#evaluate-max-samples input").fill("6")
        page.locator("#evaluate-start").click()
        page.locator("#evaluate-done, #evaluate-failed").first.wait_for(timeout=300_000)
        log = (run_dir / "eval" / "eval.log").read_text(errors="replace")[-3000:]
        assert page.locator("#evaluate-done").is_visible(), f"{page.locator('#evaluate-progress').inner_text()}\n{log}"
        table = page.locator("#evaluate-table")
        page.wait_for_function("(name) => (document.querySelector('#evaluate-table') || {}).innerText"
                               "?.includes(name)", arg=last)
        text = table.inner_text()
        assert first in text and "★" in text
        page.locator("#evaluate-chart .js-plotly-plot").wait_for()
        page.locator("#evaluate-predictions").get_by_text("reference").first.wait_for()
        screenshot(page, "evaluate", also_to=DOCS / "evaluate.png")
        for name in (first, last):
            assert (workspace.runs_dir / "demo-run" / "eval" / name / "metrics.json").is_file()

        page.get_by_role("tab", name="Export").click()
        page.locator("#export-name input, #export-name textarea").first.wait_for()
        page.wait_for_function(
            "() => { const e = document.querySelector('#export-name textarea, #export-name input');"
            " return e && e.value.endsWith('-merged'); }")
        page.locator("#export-start").click()
        page.locator("#export-done, #export-failed").first.wait_for(timeout=300_000)
        assert page.locator("#export-done").is_visible(), page.locator("#export-report").inner_text()
        verification = page.locator("#export-verification")
        assert "Verification passed" in verification.inner_text()
        # The Download button is shown by the same poll that shows the report, a moment after it.
        page.locator("#export-download").wait_for(state="visible", timeout=30_000)
        screenshot(page, "export", also_to=DOCS / "export.png")
        # A page refresh: the job is read back from disk, report and Download included.
        page.reload()
        wait_app_loaded(page)
        page.get_by_role("tab", name="Export").click()
        page.locator("#export-done").wait_for(timeout=60_000)
        assert "Verification passed" in page.locator("#export-verification").inner_text()
        page.locator("#export-download").wait_for(state="visible", timeout=30_000)
        assert page.locator("#export-jobs input").input_value() == "demo-run-final-merged"
        out = workspace.root / "exports" / "demo-run-final-merged"
        report = json.loads((out / "export_report.json").read_text())
        assert report["kind"] == "merged" and report["verification"]["passed"]
        assert (workspace.root / "exports" / "demo-run-final-merged.zip").is_file()
