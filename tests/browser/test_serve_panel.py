"""The Chat tab's Serve panel in a real browser: start a server for a run, copy
its base URL, a request to that URL answers, stop it."""

from __future__ import annotations

import httpx
import pytest

from tests.browser.harness import free_port
from tests.eval_export_runs import cached_run

RUN = "served-run"


@pytest.fixture
def served_run(workspace, demo_model_dir):
    # Created before the app starts (fixture order): the panel lists it at once.
    return cached_run(workspace, demo_model_dir, "lora", RUN)


@pytest.mark.browser
def test_serve_panel_starts_answers_and_stops(served_run, app, page):
    port = free_port()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(app.url, wait_until="domcontentloaded")
    page.wait_for_selector("#shell-tabs", timeout=60_000)
    page.get_by_role("tab", name="Chat").click()
    page.get_by_text("Serve as an OpenAI-compatible API").click()
    page.locator("#serve-run input").click()
    page.locator('[data-testid="dropdown-option"]', has_text=RUN).first.click()
    page.locator("#serve-port input").fill(str(port))
    page.locator("#serve-start").click()
    url_box = page.locator("#serve-url textarea, #serve-url input").first
    # The server imports torch and loads the models first: slow on a busy machine.
    page.wait_for_function("() => { const e = document.querySelector('#serve-url textarea, #serve-url input');"
                           " return e && e.value.startsWith('http'); }", timeout=180_000)
    url = url_box.input_value()
    assert url == f"http://127.0.0.1:{port}/v1"
    page.locator("#serve-url button").first.click()   # the copy button
    assert page.evaluate("() => navigator.clipboard.readText()") == url
    status = page.locator("#serve-status").inner_text()
    assert all(name in status for name in ("base", "checkpoint-8", "checkpoint-16", "final"))
    assert url in page.locator("#serve-python").inner_text()
    answer = httpx.post(f"{url}/chat/completions", timeout=120, json={
        "model": "checkpoint-8", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 4})
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["role"] == "assistant"
    page.locator("#serve-stop").click()
    page.locator("#serve-status").get_by_text("The server is stopped.").wait_for(timeout=60_000)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models")
