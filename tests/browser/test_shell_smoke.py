"""The shell in a real browser: the language switch translates labels and tab names, and is remembered."""

import pytest

from tests.browser.harness import screenshot, wait_app_loaded


@pytest.mark.browser
def test_language_switch_translates_and_is_remembered(app, page):
    page.goto(app.url)
    wait_app_loaded(page)
    title = page.locator("#shell-title")
    assert "Fine-tune language models on your own data" in title.inner_text()
    page.locator("#shell-language").get_by_text("中文").click()
    page.locator("#shell-title").get_by_text("在本机用你自己的数据微调语言模型").wait_for()
    # Tab names are set by a Python event after the switch: wait until every tab has one.
    page.wait_for_function(
        "() => { const t = [...document.querySelectorAll('[role=tab]')];"
        " return t.length > 0 && t.every(e => /[\\u4e00-\\u9fff]/.test(e.innerText)); }",
        timeout=60_000,
    )
    tabs = [t.inner_text() for t in page.get_by_role("tab").all()]
    assert tabs[0] == "数据" and all(name.isascii() is False for name in tabs), tabs
    screenshot(page, "shell-zh")
    # The choice is saved: a new page (and a restarted app) opens in Chinese.
    app.restart()
    page.goto(app.url)
    wait_app_loaded(page)
    page.locator("#shell-title").get_by_text("在本机用你自己的数据微调语言模型").wait_for()
