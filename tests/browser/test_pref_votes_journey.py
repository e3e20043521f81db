"""Votes -> dataset -> DPO run in a real browser: a blind vote between two
checkpoints in the Chat tab, "Train on these votes" saves the pairs as a
workspace dataset and opens the Train tab with a dpo run prefilled on the voted
checkpoint, and Start trains it to completion with the real worker."""

from __future__ import annotations

import json

import pytest

from backend.runs.files import read_status
from tests.browser.harness import screenshot
from tests.polling import wait_for
from tests.test_chat_support import make_lora_run, plain_greedy

RUN = "run-votes"


PROMPT = "What is the capital of France?"
MAX_NEW = 12


def _greedy_answers(model_dir, checkpoints) -> list[str]:
    """Each checkpoint's greedy answer to PROMPT, as Chat gives it (plain transformers + peft)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    answers = []
    for folder in checkpoints:
        model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), folder)
        answers.append(plain_greedy(model, tokenizer, [{"role": "user", "content": PROMPT}], MAX_NEW).strip())
    return answers


@pytest.fixture
def voted_run(workspace, demo_model_dir):
    """Two checkpoints whose answers to PROMPT differ and are not empty: a vote between equal
    answers makes no pair, and which seeds give that depends on the demo model's build."""
    run_dir = workspace.runs_dir / RUN
    for seed in range(10):
        folders = make_lora_run(run_dir, demo_model_dir, steps=(10, 20), incomplete_step=None, seed=seed)
        first, second = _greedy_answers(demo_model_dir, folders)
        print("SEED", seed, repr(first), repr(second))
        if first and second and first != second:
            return run_dir
    pytest.fail(f"no seed gave two different answers to {PROMPT!r}: {first!r}, {second!r}")


def _pick(page, text: str) -> None:
    page.locator("#chat-checkpoints input").click()
    page.locator('[data-testid="dropdown-option"]', has_text=text).first.click(timeout=90_000)


@pytest.mark.browser
def test_votes_become_a_dataset_and_a_dpo_run(voted_run, workspace, app, page):
    page.goto(app.url, wait_until="domcontentloaded")
    page.wait_for_selector("#shell-tabs", timeout=60_000)
    page.get_by_role("tab", name="Chat").click()
    page.locator("#chat-refresh").click()
    # The only run is chosen on load; clicking its option again would toggle it off, and a Send
    # before the list's refresh puts it back would see no run at all.
    page.locator("#chat-runs").get_by_text(RUN).wait_for(timeout=90_000)
    for text in ("checkpoint-10", "checkpoint-20"):
        _pick(page, text)
    page.locator("#chat-checkpoints input").press("Escape")
    page.locator("#chat-settings").get_by_text("Generation settings").click()
    page.locator("#chat-max-new input[type=number]").fill(str(MAX_NEW))
    page.locator("#chat-max-new input[type=number]").press("Enter")
    page.locator("#chat-blind input").check()
    page.locator("#chat-prompt textarea").fill(PROMPT)
    page.locator("#chat-send").click()
    page.locator("#chat-status").get_by_text("Done.").wait_for(timeout=120_000)
    page.locator('#chat-vote input[value="A"]').check()
    page.locator("#chat-vote-button").click()
    page.locator("#chat-status").get_by_text("Vote recorded").wait_for(timeout=60_000)

    page.locator("#chat-votes").get_by_text("Votes as training data").click()
    page.locator("#chat-votes-name textarea, #chat-votes-name input").first.fill("my-votes")
    page.locator("#chat-votes-train").click()
    # The handler saves the pairs, then names the prefilled run; under load that can take a while,
    # and a refusal there (not a missing tab) is what a failure should show.
    message = page.locator("#chat-votes-message")
    wait_for(lambda: "dpo" in message.inner_text() or "⚠️" in message.inner_text(), "the votes' message",
             limit_s=180)
    assert "⚠️" not in message.inner_text(), message.inner_text() + "\n" + app.log_tail()
    # The Train tab opens with the dpo run prefilled.
    page.locator("#train-dataset input").first.wait_for(timeout=60_000)
    wait_for(lambda: page.locator("#train-dataset input").first.input_value() == "my-votes", "the prefilled dataset",
             limit_s=60)
    # The preference section opens with the stage set to dpo.
    page.locator('#train-stage input[value="dpo"]').wait_for(timeout=60_000)
    assert page.locator('#train-stage input[value="dpo"]').is_checked()
    assert "checkpoint-" in page.locator("#train-init-adapter textarea, #train-init-adapter input").first.input_value()
    meta = json.loads((workspace.datasets_dir / "my-votes" / "meta.json").read_text())
    assert meta["source"]["run"] == RUN and meta["source"]["pairs"] == 1 and meta["rows_after"] == 1
    row = json.loads((workspace.datasets_dir / "my-votes" / "data.jsonl").read_text().splitlines()[0])
    assert row["prompt"][-1]["content"] == PROMPT and row["chosen"] != row["rejected"]
    screenshot(page, "pref-votes-train")

    page.locator("#train-start").click()
    page.locator("#train-message").get_by_text("Started").wait_for(timeout=60_000)
    runs = wait_for(lambda: [p for p in workspace.runs_dir.iterdir() if p.name != RUN and p.is_dir()], "the new run")
    run_dir = runs[0]
    state = wait_for(lambda: read_status(run_dir).get("state") in ("completed", "failed") and read_status(run_dir),
                     "the dpo run to end", limit_s=600)
    assert state["state"] == "completed", (run_dir / "train.log").read_text()[-3000:]
    config = (run_dir / "config.yaml").read_text()
    assert "stage: dpo" in config and "dataset: my-votes" in config
    assert f"init_adapter: {voted_run / 'checkpoint-'}" in config  # continues the checkpoint voted on
    assert (run_dir / "final" / "COMPLETE").is_file()
