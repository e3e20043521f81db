"""The newcomer journey in a real browser against the real app process:
upload ../shared/data/identity.json, see that Train fills its placeholders and
its conflicting-answer count, apply a fix and save; start a short demo run; see chart points
appear; restart app.py in the middle of the run and see the chart keep its
earlier points and grow; stop it; resume it to completion. Screenshots of
every tab go to test-artifacts/ when asked for (FINETUNE_STUDIO_STEP_SCREENSHOTS;
`make screenshots` also copies the Train and Runs ones to docs/screenshots/)."""

from __future__ import annotations

import re

import pytest

from tests.browser.harness import REPO, screenshot, screenshots_wanted
from tests.browser.test_data_tab import ANALYSIS_MS, expected_counts
from tests.polling import wait_for as wait_until

DOCS = REPO / "docs" / "screenshots"
# Long enough to restart the app and stop in the middle, and no longer: the resume trains the rest.
# The demo model trains 2-3 steps/s here; the Stop came at step 146, 70 s after the start, and a
# 160-step run once ended before it.
STEPS = 360


def open_app(page, app) -> None:
    # Not networkidle: the monitor's timers poll every few seconds.
    page.goto(app.url, wait_until="domcontentloaded")
    page.wait_for_selector("#shell-tabs")


def tab(page, name: str) -> None:
    page.get_by_role("tab", name=name).click()


def fill_number(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]").first
    box.fill(str(value))
    box.press("Tab")


def chart_points(page, elem_id: str) -> int:
    """Points of the chart's longest series (the raw train loss), from the plotly figure the
    page holds: data points, not traces (a chart with one point or a hundred has the same traces)."""
    return page.evaluate(
        """(id) => { const plot = document.querySelector(`#${id} .js-plotly-plot`);
                     if (!plot || !plot.data) return 0;
                     return Math.max(0, ...plot.data.map(trace => (trace.x || []).length)); }""", elem_id)


def run_state(page) -> str:
    """The runs table's text (the workspace holds this journey's run only)."""
    return page.locator("#runs-table").inner_text()


def data_steps(page, shared_data) -> str:
    """Upload, read the report, fix, save; returns the saved dataset's name."""
    identity = shared_data / "identity.json"
    placeholder, conflicting = expected_counts(identity)
    tab(page, "Data")
    page.locator("#data-upload input[type=file]").set_input_files(str(identity))
    page.locator("#data-status").get_by_text("alpaca", exact=False).wait_for(timeout=ANALYSIS_MS)
    # The fix buttons carry the counts of the checks they fix; {{name}} / {{author}} are Train's to fill.
    assert page.locator("#data-fix-fill").inner_text() == "Fill placeholders (0)"
    assert f"Train fills these in {placeholder} rows" in page.locator("#data-status").inner_text()
    assert page.locator("#data-fix-conflicts_keep_first").inner_text().endswith(f"({conflicting})")
    page.locator("#data-summary span").get_by_text("conflicting_answers", exact=True).first.wait_for()
    screenshot(page, "journey-data-report")
    page.locator("#data-fix-conflicts_keep_first").click()
    page.locator("#data-applied").get_by_text("conflicts", exact=False).wait_for(timeout=ANALYSIS_MS)
    page.locator("#data-save-name textarea, #data-save-name input").first.fill("identity-fixed")
    page.locator("#data-save").click()
    page.locator("#data-saved").get_by_text("identity-fixed").wait_for(timeout=ANALYSIS_MS)
    screenshot(page, "journey-data-saved")
    return "identity-fixed"


@pytest.mark.slow
def test_newcomer_journey(app, page, shared_data):
    open_app(page, app)
    dataset = data_steps(page, shared_data)

    tab(page, "Train")
    dataset_box = page.locator("#train-dataset input").first
    wait_until(lambda: dataset_box.input_value() == dataset, "Train to pick up the saved dataset", 30)
    fill_number(page, "train-max-steps", STEPS)
    fill_number(page, "train-save-steps", 60)  # a checkpoint, its eval and its report every 10 steps took about 40% of the run here
    page.locator("#train-derived").get_by_text(re.compile(rf"{STEPS}\s+steps in all")).wait_for()
    page.locator("#train-estimate").get_by_text("Fits on CPU").wait_for(timeout=60_000)
    screenshot(page, "train", also_to=DOCS / "train.png")
    page.locator("#train-start").click()
    page.locator("#train-message").get_by_text("Started run").wait_for(timeout=60_000)
    # The Train tab follows the run it started: its bar with the step total, then its loss line,
    # drawn by a timer that ticks only while this tab shows; the page still answers a click meanwhile.
    page.locator("#train-watch").get_by_text(re.compile(rf"step \d+ / {STEPS}")).wait_for(timeout=120_000)
    page.locator("#train-watch-loss polyline").wait_for(timeout=180_000)
    page.locator("#train-show-command").click()
    page.locator("#train-command").get_by_text("backend.train").first.wait_for(timeout=60_000)

    tab(page, "Runs")
    before = wait_until(lambda: (n := chart_points(page, "runs-chart-loss")) >= 2 and n, "loss points on the chart", 180)

    # The app restarts in the middle of the run: the worker goes on, the chart keeps every earlier point and grows.
    app.restart(page=page)
    open_app(page, app)
    tab(page, "Runs")
    after = wait_until(lambda: chart_points(page, "runs-chart-loss"), "the chart after a restart", 120)
    assert after >= before, f"the chart lost points over the restart: {before} before, {after} after"
    assert "running" in run_state(page)
    wait_until(lambda: chart_points(page, "runs-chart-loss") > after, "the chart to grow after the restart", 300)
    page.locator("#runs-stop").click()
    wait_until(lambda: "stopped" in run_state(page), "the run to stop", 120)
    stopped_at = chart_points(page, "runs-chart-loss")
    page.locator("#runs-resume").click()
    wait_until(lambda: "completed" in run_state(page), "the resumed run to complete", 900)
    page.locator("#runs-progress").get_by_text(f"step {STEPS} / {STEPS}").wait_for(timeout=30_000)
    wait_until(lambda: chart_points(page, "runs-chart-loss") > stopped_at, "the resumed run's points on the chart", 60)
    screenshot(page, "runs", also_to=DOCS / "runs.png")
    if screenshots_wanted():  # the last tabs' pictures; the tabs themselves are other tests' (2-5 s a click)
        for name in ("Chat", "Evaluate", "Export"):
            tab(page, name)
            screenshot(page, f"journey-{name.lower()}")
