"""The Chat tab in a real browser: base + two checkpoints answer one prompt in
three columns; blind mode records a vote in the run's preferences.json."""

from __future__ import annotations

import json

import pytest

from tests.browser.harness import REPO, screenshot
from tests.test_chat_support import make_lora_run

RUN = "run-chat"


@pytest.fixture
def chat_run(workspace, demo_model_dir):
    # Created before the app starts (fixture order): the tab lists it at once.
    run_dir = workspace.runs_dir / RUN
    make_lora_run(run_dir, demo_model_dir, steps=(10, 20), incomplete_step=30)
    return run_dir


def _pick(page, text: str) -> None:
    page.locator("#chat-checkpoints input").click()
    # The first list refresh imports torch in the app: slow on a busy machine.
    page.locator('[data-testid="dropdown-option"]', has_text=text).first.click(timeout=90_000)


def _answers(page, count: int) -> list[str]:
    return [page.locator(f"#chat-answer-{i} .bot").last.inner_text() for i in range(count)]


def _clear(page) -> None:
    """Clear empties the columns and the status, so the next "Done." is the next answer's."""
    page.locator("#chat-clear").click()
    page.wait_for_function("() => !document.querySelector('#chat-status').innerText.includes('Done.')",
                           timeout=60_000)
    page.wait_for_function("() => document.querySelectorAll('#chat-answer-0 .bot').length === 0", timeout=60_000)


def _send_and_wait(page, text: str) -> None:
    page.locator("#chat-prompt textarea").fill(text)
    page.locator("#chat-send").click()
    page.locator("#chat-status").get_by_text("Done.").wait_for(timeout=120_000)


@pytest.mark.browser
def test_three_columns_answer_and_blind_vote_is_saved(chat_run, app, page):
    page.goto(app.url, wait_until="domcontentloaded")
    # Not networkidle: the tabs' timers keep the network busy.
    page.wait_for_selector("#shell-tabs", timeout=60_000)
    page.get_by_role("tab", name="Chat").click()
    page.locator("#chat-refresh").click()
    for text in ("base", "checkpoint-10", "checkpoint-20"):
        _pick(page, text)
    page.locator("#chat-checkpoints input").press("Escape")
    # The incomplete checkpoint-30 is not offered.
    page.locator("#chat-checkpoints input").click()
    assert page.locator('[data-testid="dropdown-option"]', has_text="checkpoint-30").count() == 0
    page.locator("#chat-checkpoints input").press("Escape")

    # Short answers keep the test quick: the perturbed adapters ramble to the limit.
    page.locator("#chat-settings").get_by_text("Generation settings").click()
    page.locator("#chat-max-new input[type=number]").fill("24")
    page.locator("#chat-max-new input[type=number]").press("Enter")
    _send_and_wait(page, "What is the capital of France?")
    for index, label in enumerate(("base", "checkpoint-10", "checkpoint-20")):
        assert label in page.locator(f"#chat-head-{index}").inner_text()
    answers = _answers(page, 3)
    assert all(answer.strip() for answer in answers), answers
    assert not page.locator("#chat-col-3").is_visible()
    assert "step 20" in page.locator("#chat-head-2").inner_text()

    _clear(page)
    page.locator("#chat-blind input").check()
    _send_and_wait(page, "What colour is the sky?")
    assert page.locator("#chat-head-0").inner_text().strip().startswith("Answer A")
    page.locator('#chat-vote input[value="B"]').check()
    page.locator("#chat-vote-button").click()
    page.locator("#chat-status").get_by_text("Vote recorded").wait_for(timeout=60_000)
    screenshot(page, "chat", also_to=REPO / "docs" / "screenshots" / "chat.png")

    saved = json.loads((chat_run / "preferences.json").read_text())
    assert len(saved["votes"]) == 1
    vote = saved["votes"][0]
    assert sorted(vote["candidates"]) == ["base", "checkpoint-10", "checkpoint-20"]
    assert vote["winner"] in vote["candidates"] and saved["tally"][vote["winner"]]["wins"] == 1
    # The revealed header of column B names the same checkpoint the file recorded.
    assert vote["winner"] in page.locator("#chat-head-1").inner_text()
    assert page.locator("#chat-tally").get_by_text(vote["winner"]).count() >= 1
