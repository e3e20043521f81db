"""ui/tab_timers.py without a browser: a tab's polls become one timer and one tick handler, each poll
reading its own inputs and filling its own outputs (tests/browser/test_tab_timers.py covers the page)."""

from __future__ import annotations

import gradio as gr

from ui.tab_timers import TabTimers, _run_polls


def failing(_value):
    raise RuntimeError("this panel's file cannot be read")


def test_one_handler_runs_every_poll_of_a_tab_into_its_own_outputs():
    with gr.Blocks():
        lang, run, seen = gr.State("en"), gr.State("run-1"), gr.State("")
        note, table, chart, other = gr.Markdown(), gr.Markdown(), gr.Markdown(), gr.Markdown()
    timers = TabTimers()
    timers.poll(3.0, lambda lang, run, seen: (f"{lang}:{run}", f"seen {seen!r}"), [lang, run, seen], [note, table])
    timers.poll(2.0, lambda run: f"chart of {run}", run, chart)
    timers.poll(2.0, failing, run, other)
    polls = timers._polls[None]
    tick = _run_polls(polls, [lang, run, seen], [note, table, chart, other])
    note_value, table_value, chart_value, other_value = tick("zh", "run-2", "x")
    assert (note_value, table_value, chart_value) == ("zh:run-2", "seen 'x'", "chart of run-2")
    assert other_value == gr.skip()  # the failing poll leaves its output as it was, the others still ran
    assert timers._every[None] == 2.0  # the tab ticks at the shortest interval asked


def test_a_tab_with_one_output_gets_a_value_not_a_list():
    with gr.Blocks():
        run, note = gr.State("run-1"), gr.Markdown()
    timers = TabTimers()
    timers.poll(2.0, lambda run: f"about {run}", run, note)
    assert _run_polls(timers._polls[None], [run], [note])("run-3") == "about run-3"


def test_only_the_shown_tabs_timer_is_on_and_only_the_first_starts_on():
    timers = TabTimers(first_tab="data")
    with gr.Blocks():
        run, note = gr.State("run-1"), gr.Markdown()
        for tab in ("data", "runs", "evaluate"):
            timers.building = tab
            timers.poll(2.0, lambda run: run, run, note)
        timers.building = None
        with gr.Tabs():
            tabs = {name: gr.Tab(name, id=name) for name in ("data", "runs", "evaluate")}
        timers.wire(tabs)
    assert [timer.active for timer in timers._timers.values()] == [True, False, False]
    assert [state.active for state in timers.states("runs")] == [False, True, False]
