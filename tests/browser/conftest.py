"""Fixtures for browser tests: a real app process on a temporary workspace
(demo model linked in, like tests/conftest.py's `workspace`) and a headless
chromium page. Every test here is marked `browser`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.harness import ARTIFACTS, AppProcess, launch_browser, screenshots_wanted

FAILED = pytest.StashKey[bool]()


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Notes a failed set-up or call on the test, for `page` to keep its last screen."""
    report = yield
    if report.failed:
        item.stash[FAILED] = True
    return report


@pytest.fixture
def app(workspace):
    """The app running on a free port over the test's workspace; restart with app.restart()."""
    process = AppProcess(workspace.root)
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_browser(playwright)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, request):
    """A fresh English page; a screenshot of its last state lands in test-artifacts/ when the test fails
    (or every test, when step screenshots are asked for: tests/browser/harness.py)."""
    context = chromium.new_context(locale="en-US", viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(30_000)
    # A page opened right after an app (re)start sometimes waited over 30 s for its "load" event on a
    # busy machine; the tests navigate to "domcontentloaded" and then wait for the app's own elements.
    context.set_default_navigation_timeout(120_000)
    page = context.new_page()
    yield page
    try:
        if request.node.stash.get(FAILED, False) or screenshots_wanted():
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-last.png"), full_page=True)
    finally:
        context.close()
