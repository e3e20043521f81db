"""Evaluate and Export tabs in a real browser: evaluate two checkpoints of a run
(table with the best marked, chart), judge them against each other with a judge
endpoint (a real local chat-completions server, tests/judge_server.py) and write
an eval set with it, then export the merged model, see the verification pass,
and see the report and Download again after a page refresh."""

from __future__ import annotations

import json

import pytest

from backend.evaluation.results import default_checkpoint
from tests.browser.harness import REPO, screenshot, wait_app_loaded
from tests.eval_export_runs import checkpoint_names, copy_run
from tests.judge_server import ChatServer

DOCS = REPO / "docs" / "screenshots"
EVALSET = [{"prompt": "What is 7 times 6?", "expected": "42"}, {"prompt": "Spell 'cat' backwards.", "expected": "tac"}]


def judge(prompt: str, number: int) -> str:
    """Writes the eval set when asked for prompts; otherwise always prefers the first answer shown."""
    return json.dumps(EVALSET) if prompt.startswith("Write ") else "The first reads better.\nVerdict: A"


def text_field(page, elem_id: str):
    """A gradio Textbox's editable element (a textarea, or an input for a one-line type)."""
    return page.locator(f"#{elem_id} textarea, #{elem_id} input").first


def judge_the_two(page, workspace, first: str, last: str) -> None:
    """The Judge section: count the calls, judge last against first on the predictions, see the table; then
    write an eval set from a description and save it as a dataset."""
    with ChatServer(judge) as server:
        page.locator("#judge").get_by_text("Judge (a model that compares answers)").click()
        text_field(page, "judge-url").fill(server.url)
        text_field(page, "judge-model").fill("judge")
        text_field(page, "judge-a").fill(last)
        text_field(page, "judge-b").fill(first)
        page.locator("#judge-source input").click()
        page.get_by_role("option", name="the evaluation above (predictions)").click()
        page.locator("#judge-plan").click()
        page.locator("#judge-status").get_by_text("judge calls to make").wait_for(timeout=60_000)
        page.locator("#judge-start").click()
        page.wait_for_function("(name) => (document.querySelector('#judge-table') || {}).innerText?.includes(name)",
                               arg=f"pairwise-{last}-vs-{first}", timeout=120_000)
        assert (workspace.runs_dir / "demo-run" / "eval" / "judge" / f"pairwise-{last}-vs-{first}.json").is_file()

        page.locator("#evalset").get_by_text("Write an eval set from a description").click()
        text_field(page, "evalset-description").fill("arithmetic and words")
        page.locator("#evalset-write").click()
        page.locator("#evalset-status").get_by_text("2 prompts written").wait_for(timeout=60_000)
        page.locator("#evalset-table").get_by_text("What is 7 times 6?").wait_for()
        text_field(page, "evalset-name").fill("words-eval")
        page.locator("#evalset-save").click()
        page.locator("#evalset-status").get_by_text("Saved 2 rows as dataset words-eval").wait_for(timeout=30_000)
    assert (workspace.datasets_dir / "words-eval" / "data.jsonl").read_text(encoding="utf-8").count("\n") == 2


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
        judge_the_two(page, workspace, first, last)

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
        exported = f"demo-run-{default_checkpoint(run_dir)}-merged"  # Export offers the best checkpoint first
        assert page.locator("#export-jobs input").input_value() == exported
        out = workspace.root / "exports" / exported
        report = json.loads((out / "export_report.json").read_text())
        assert report["kind"] == "merged" and report["verification"]["passed"]
        assert (workspace.root / "exports" / f"{exported}.zip").is_file()
