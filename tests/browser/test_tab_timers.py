"""A tab's polling timers tick only while the tab is shown (ui/tab_timers.py): every tick costs the
page a walk over its component tree, so a hidden tab's ticks cost CPU a run beside it needs."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from tests.browser.harness import wait_app_loaded
from tests.polling import wait_for


def ticks_by_tab(url: str) -> dict[int, str | None]:
    """{event id of a timer's tick: the tab whose components it updates, None outside the tabs}, from
    the app's config (the timers themselves sit outside the tabs)."""
    config = json.load(urllib.request.urlopen(url + "config", timeout=30))
    components = {c["id"]: c for c in config["components"]}
    tab_of: dict[int, str | None] = {}

    def walk(node: dict, tab: str | None) -> None:
        component = components.get(node["id"], {})
        if component.get("type") == "tabitem":
            tab = component["props"].get("id")
        tab_of[node["id"]] = tab
        for child in node.get("children", []):
            walk(child, tab)

    walk(config["layout"], None)
    ticks = {}
    for dep in config["dependencies"]:
        if any(event == "tick" and components[target]["type"] == "timer" for target, event in dep["targets"]):
            shown = {tab_of[out] for out in dep["outputs"] if out in tab_of}  # gr.State is not laid out
            assert len(shown) <= 1, f"one tick updates several tabs: {shown}"
            ticks[dep["id"]] = shown.pop() if shown else None
    return ticks


def record_events(page) -> list[tuple[float, int]]:
    """(time.monotonic(), event id) of each event the page sends from now on (gradio's queue/join bodies)."""
    sent: list[tuple[float, int]] = []

    def on_request(request):
        if request.url.endswith("/queue/join") or "/queue/join?" in request.url:
            sent.append((time.monotonic(), json.loads(request.post_data or "{}").get("fn_index")))

    page.on("request", on_request)
    return sent


QUIET_S = 12.0  # over twice the longest interval of the Runs tab's polls (5 s)


@pytest.mark.browser
def test_only_the_shown_tabs_timers_tick(app, page):
    ticks = ticks_by_tab(app.url)
    runs_ticks = {fn for fn, tab in ticks.items() if tab == "runs"}
    assert len(runs_ticks) == 1 and {None} <= set(ticks.values()), ticks  # one for Runs' polls; the run notice
    sent = record_events(page)
    page.goto(app.url, wait_until="domcontentloaded")
    wait_app_loaded(page)
    page.get_by_role("tab", name="Runs").click()

    def runs_ticked() -> bool:
        page.wait_for_timeout(500)  # lets playwright deliver the page's request events
        return any(fn in runs_ticks for _at, fn in sent)

    wait_for(runs_ticked, "a tick of the Runs tab's timer while it is shown", 60)
    page.get_by_role("tab", name="Data").click()
    clicked = time.monotonic()

    def quiet_window() -> bool:
        """QUIET_S seconds without a Runs tick, in which the run notice (on every tab) did tick, so the
        recording still works. On a busy machine the click's own event, which turns the timer off, may
        take a while to be served: the window is looked for, not assumed right after the click."""
        page.wait_for_timeout(500)
        now = time.monotonic()
        last_runs = max((at for at, fn in sent if fn in runs_ticks), default=clicked)
        window = [ticks.get(fn, "not a tick") for at, fn in sent if at >= now - QUIET_S]
        return now - max(last_runs, clicked) >= QUIET_S and None in window

    # Before one timer per tab, the Runs tab's polls ticked every 2-5 s on every tab: never quiet.
    wait_for(quiet_window, f"{QUIET_S:.0f} s on Data with the run notice's ticks and none of Runs'", 120)
