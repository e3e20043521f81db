"""GRPO in a real browser against the real app: choosing the grpo stage shows
the Train tab's GRPO section with its default rewards ticked and the Plan's
prompts x completions; Start trains a two-step grpo run on the demo model with
the real worker; the Runs tab's GRPO panel then charts the rewards and lists
the sampled completions."""

from __future__ import annotations

import json

import pytest

from backend.runs.files import read_status
from tests.browser.harness import screenshot
from tests.browser.test_journey import chart_points, fill_number, open_app, tab
from tests.polling import wait_for


def _sums(path) -> str:
    rows = [{"system": "Answer as <answer>N</answer>.", "instruction": f"What is {10 + i} + {20 + 2 * i}?",
             "output": str(30 + 3 * i)} for i in range(16)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.mark.slow
def test_grpo_section_start_and_reward_panel(workspace, app, page):
    dataset = _sums(workspace.root / "sums.jsonl")
    open_app(page, app)
    tab(page, "Train")
    section = page.locator("#train-section-grpo")
    assert not section.is_visible()  # the app starts on an sft run
    box = page.locator("#train-dataset input").first
    box.fill(dataset)
    box.press("Enter")
    page.locator("#train-section-preference").get_by_text("Stage: preference tuning").click()  # closed for sft
    page.locator('#train-stage input[value="grpo"]').check(timeout=180_000)
    section.wait_for(state="visible", timeout=120_000)  # the stage's change event, on a busy machine
    assert page.locator("#train-reward-exact_match input").is_checked()  # grpo's default rewards
    assert page.locator("#train-reward-format input").is_checked()
    assert not page.locator("#train-reward-length input").is_checked()
    for elem_id, value in (("train-max-steps", 2), ("train-num-generations", 4), ("train-max-completion-length", 8),
                           ("train-cutoff-len", 96)):
        fill_number(page, elem_id, value)
    page.locator("#train-derived").get_by_text("completions an optimizer step").wait_for(timeout=180_000)
    assert "**" not in page.locator("#train-derived").inner_text()  # rendered Markdown, not its source
    screenshot(page, "grpo-train")
    page.locator("#train-start").click(timeout=120_000)
    page.locator("#train-message").get_by_text("Started run").wait_for(timeout=180_000)
    run_dir = wait_for(lambda: next((p for p in workspace.runs_dir.iterdir() if (p / "config.yaml").is_file()), None),
                       "the run folder")
    config = (run_dir / "config.yaml").read_text()
    assert "stage: grpo" in config and "kind: exact_match" in config and "kind: format" in config

    tab(page, "Runs")
    page.locator("#runs-grpo").first.wait_for(state="visible", timeout=120_000)  # gradio gives a group's id to two nested divs
    state = wait_for(lambda: read_status(run_dir).get("state") in ("completed", "failed") and read_status(run_dir),
                     "the grpo run to end", limit_s=900)
    assert state["state"] == "completed", (run_dir / "train.log").read_text()[-3000:]
    wait_for(lambda: chart_points(page, "runs-grpo-chart-rewards") >= 2, "two logged steps on the reward chart", 600)
    samples = page.locator("#runs-grpo-samples")
    # Text, not get_by_text: gradio's table also keeps hidden copies of its cells.
    wait_for(lambda: "What is " in samples.inner_text(), "the sampled completions in the table", 300)
    assert "exact match" in samples.inner_text() and "weighted sum" in samples.inner_text()
    page.locator("#runs-grpo-note").get_by_text("completions of step 2").wait_for(timeout=180_000)
    screenshot(page, "grpo-runs")
