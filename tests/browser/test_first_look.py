"""The first look in a real browser: the Data tab says what to do before any
file, optional numbers are empty, and in Chinese the Train tab's help texts
and the Runs table headers are Chinese too."""

import pytest

from tests.browser.harness import screenshot, wait_app_loaded


@pytest.mark.browser
def test_first_look_and_chinese_help(app, page):
    page.goto(app.url)
    wait_app_loaded(page)
    page.locator("#data-empty").get_by_text("Nothing checked yet").wait_for()
    assert not page.locator("#data-summary").is_visible() and not page.locator("#data-histogram").is_visible()
    page.get_by_role("tab", name="Train").click()
    assert page.locator("#train-eval-steps textarea").input_value() == ""
    assert page.locator("#train-num-processes textarea").input_value() == ""
    page.locator("#shell-language").get_by_text("中文").click()
    page.locator("#train-learning-rate").get_by_text("峰值学习率").wait_for()
    page.locator("#train-trust-remote-code").get_by_text("信任此模型的远程代码").wait_for()
    screenshot(page, "train-zh")
    page.get_by_role("tab", name="运行").click()
    page.locator("#runs-table").get_by_text("状态").first.wait_for()
    page.get_by_role("tab", name="数据").click()
    page.locator("#data-empty").get_by_text("尚未检查").wait_for()
    assert not page.locator(".toast-body.error").count(), page.locator(".toast-body").all_inner_texts()
