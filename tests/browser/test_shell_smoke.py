"""The shell in a real browser: the first look, and the language switch translates labels, help texts,
table headers and tab names, and is remembered; then (the same app) the page title follows a run and
Chromium shows a Notification when it ends (ui/panels/run_notice.py)."""

import os
import time

import psutil
import pytest

from backend.runs.files import update_status
from tests.browser.harness import screenshot, wait_app_loaded

# Observes the page's Notifications without replacing them: the real one is still constructed (super),
# and only one that was constructed is recorded.
RECORD_NOTIFICATIONS_JS = """
window.__notices = [];
if (window.Notification) {
  const Real = window.Notification;
  window.Notification = class extends Real {
    constructor(title, options) {
      super(title, options);
      window.__notices.push({title: title, body: (options || {}).body});
    }
  };
}
"""


@pytest.mark.browser
def test_language_switch_translates_and_is_remembered(app, page, workspace):
    page.goto(app.url, wait_until="domcontentloaded")
    wait_app_loaded(page)
    title = page.locator("#shell-title")
    assert "Fine-tune language models on your own data" in title.inner_text()
    # The first look: the Data tab says what to do instead of a bare table and an empty chart frame,
    # and the Train form's optional numbers are empty rather than 0.
    page.locator("#data-empty").get_by_text("Nothing checked yet").wait_for()
    assert not page.locator("#data-summary").is_visible() and not page.locator("#data-histogram").is_visible()
    page.get_by_role("tab", name="Train").click()
    assert page.locator("#train-eval-steps textarea").input_value() == ""
    assert page.locator("#train-num-processes textarea").input_value() == ""
    page.locator("#shell-language").get_by_text("中文").click()
    page.locator("#shell-title").get_by_text("在本机用你自己的数据微调语言模型").wait_for()
    # Help texts under the fields and the Runs table's headers are translated too.
    page.locator("#train-learning-rate").get_by_text("峰值学习率").wait_for()
    page.locator("#train-trust-remote-code").get_by_text("信任此模型的远程代码").wait_for()
    page.get_by_role("tab", name="运行").click()
    page.locator("#runs-table").get_by_text("状态").first.wait_for()
    page.get_by_role("tab", name="数据").click()
    page.locator("#data-empty").get_by_text("尚未检查").wait_for()
    assert not page.locator(".toast-body.error").count(), page.locator(".toast-body").all_inner_texts()
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
    app.restart(page=page)
    page.goto(app.url, wait_until="domcontentloaded")
    wait_app_loaded(page)
    page.locator("#shell-title").get_by_text("在本机用你自己的数据微调语言模型").wait_for()
    check_run_notice(app, page, workspace)


def check_run_notice(app, page, workspace) -> None:
    """The page (in Chinese by now) with notifications allowed through Playwright's context: its title
    shows a running run's step, the Settings button asks for the permission, and the run's end shows
    a Notification. The run is a folder whose process is this test's own (alive: the app keeps it running)."""
    page.context.grant_permissions(["notifications"], origin=app.url.rstrip("/"))
    page.context.add_init_script(RECORD_NOTIFICATIONS_JS)
    run_dir = workspace.runs_dir / "20250101-120000-notice"
    run_dir.mkdir()
    update_status(run_dir, run_id=run_dir.name, state="running", pid=os.getpid(),
                  create_time=psutil.Process().create_time(), started_at=time.time(), global_step=5, max_steps=40)
    page.goto(app.url, wait_until="domcontentloaded")
    wait_app_loaded(page)
    page.wait_for_function("(t) => document.title === t", arg="▶ 第 5/40 步 · FineTune Studio", timeout=60_000)
    page.get_by_role("tab", name="设置").click()
    page.locator("#notify-allow").click()
    page.locator("#notify-said").get_by_text("浏览器通知已开启").wait_for()
    update_status(run_dir, state="completed", global_step=40, ended_at=time.time())
    page.wait_for_function("() => window.__notices.length > 0", timeout=60_000)
    assert page.evaluate("window.__notices") == [{"title": f"运行 {run_dir.name} 已完成", "body": "第 40/40 步"}]
    assert page.title() == "✓ 已完成 · FineTune Studio"
