"""A tab's polls: one timer per tab, ticking only while the tab is shown.

Every event costs gradio 6's page a walk over its component tree for each loading status it holds
(core.js `update_state`, called by `update_loading_stati_state` on every event's status change), and
the walk grows with every tab mounted. With each panel on its own gr.Timer, the page burned
10.8-11.0 CPU-seconds in 10 s on whichever tab was open once all had been visited: half of a
2-core machine, taken from a run training beside it (bench/page_cpu.py, docs/BENCHMARKS.md). So
the panels of a tab register their polls here (`poll`), and the shell makes one timer per tab,
at the shortest interval asked, whose one tick event runs them all. A tab's timer starts off unless
it is the first tab; selecting a tab (a click, or a handler that switches to it: `switched_by`)
turns its timer on and the others' off. Polls registered outside any tab tick on every tab (the
run notice keeps a gr.Timer of its own: it is built after the tabs are wired).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

log = logging.getLogger(__name__)


@dataclass
class _Poll:
    fn: Callable
    inputs: list
    outputs: list


def _as_list(components: Any) -> list:
    if components is None:
        return []
    return list(components) if isinstance(components, list | tuple) else [components]


def _unique(components: list) -> list:
    seen: dict[int, Any] = {}
    for component in components:
        seen.setdefault(component._id, component)
    return list(seen.values())


@dataclass
class TabTimers:
    first_tab: str | None = None
    building: str | None = None  # the tab whose build() is running; None outside the tabs
    _polls: dict[str | None, list[_Poll]] = field(default_factory=dict)
    _every: dict[str | None, float] = field(default_factory=dict)
    _timers: dict[str, Any] = field(default_factory=dict)  # tab -> its gr.Timer, once wired
    _switches: list[tuple[Any, str, Any]] = field(default_factory=list)

    def poll(self, seconds: float, fn: Callable, inputs: Any, outputs: Any) -> None:
        """Call `fn(*inputs)` about every `seconds` while the tab being built is shown, into `outputs`
        (what a gr.Timer(seconds).tick(fn, inputs, outputs) would do). A poll that raises is logged
        and leaves its outputs as they were; the tab's other polls still run."""
        tab = self.building
        self._polls.setdefault(tab, []).append(_Poll(fn, _as_list(inputs), _as_list(outputs)))
        self._every[tab] = min(seconds, self._every.get(tab, seconds))

    def switched_by(self, event: Any, tab: str, when: Any) -> None:
        """`event` (a handler's event, e.g. a click) shows `tab` by returning gr.Tabs(selected=tab)
        whenever component `when` holds a value after it: a programmatic switch fires no select
        event, so its timer is turned on after it. (A switch that leaves the previous tab's timer on,
        as Chat's "Train on these votes" does, only costs its ticks until the next click.)"""
        self._switches.append((event, tab, when))

    def wire(self, tabs: dict[str, Any]) -> None:
        """Called by the shell once every tab is built (inside its gr.Blocks)."""
        private = {"api_visibility": "private", "show_progress": "hidden"}
        for tab, polls in self._polls.items():
            timer = gr.Timer(self._every[tab], active=tab is None or tab == self.first_tab)
            inputs = _unique([c for p in polls for c in p.inputs])
            outputs = _unique([c for p in polls for c in p.outputs])
            timer.tick(_run_polls(polls, inputs, outputs), inputs, outputs, trigger_mode="always_last", **private)
            if tab is not None:
                self._timers[tab] = timer
        if not self._timers:
            return
        gated = list(self._timers.values())
        one = len(gated) == 1  # gradio takes a single output's value, not a list of one

        def show(name: str | None):
            updates = self.states(name) if name else [gr.skip()] * len(gated)
            return updates[0] if one else updates

        for name, tab in tabs.items():
            tab.select(lambda name=name: show(name), None, gated, **private)
        for event, name, when in self._switches:
            event.then(lambda value, name=name: show(name if value else None), when, gated, **private)

    def states(self, shown: str) -> list:
        """gr.Timer updates for tab `shown` on screen: its timer on, every other tab's off."""
        return [gr.Timer(active=tab == shown) for tab in self._timers]


def _run_polls(polls: list[_Poll], inputs: list, outputs: list) -> Callable:
    """The one tick handler of a tab: each poll gets its own inputs, and fills its own outputs."""
    where = {component._id: n for n, component in enumerate(outputs)}
    index = {component._id: n for n, component in enumerate(inputs)}

    def tick(*values):
        result = [gr.skip()] * len(outputs)
        for poll in polls:
            try:
                answer = poll.fn(*(values[index[c._id]] for c in poll.inputs))
            except Exception:  # one panel's failure must not stop the tab's other polls
                log.exception("poll %s failed", getattr(poll.fn, "__name__", poll.fn))
                continue
            answers = list(answer) if len(poll.outputs) > 1 else [answer]
            for component, value in zip(poll.outputs, answers, strict=True):
                result[where[component._id]] = value
        return result if len(outputs) > 1 else result[0]

    return tick
