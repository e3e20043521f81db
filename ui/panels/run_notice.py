"""A word in the browser when a run ends, from whichever tab of the app is open.

The shell places this once, beside the tabs: its own timer asks `notice` for the runs' states
(plain values, as JSON in a hidden box), and a small script in the page sets document.title to
the state of the running run ("▶ step 12/40 · FineTune Studio", "✓ completed · ...") and, when
a run the page saw unfinished reaches an end state, shows a browser Notification, if the user
allowed them (the Settings panel's "Notify me when a run ends": ui/panels/notify_panel.py). The page
remembers what it saw in `window`, so each open page notifies once per run end; the Notification's
tag (run id + state) lets the browser fold the same end shown by two open pages into one.
"""

from __future__ import annotations

import json
import time

import gradio as gr

from backend.messages import Message
from backend.runs.info import RunError
from backend.runs.notify import END_STATES
from ui.context import UIContext
from ui.i18n import localize
from ui.texts.run_notice_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)

TICK_S = 3.0             # how often the page asks (seconds)
RECENT_S = 24 * 3600     # ended runs the page is told about: the last day's (seconds)
APP = "FineTune Studio"
MARKS = {"running": "▶", "queued": "▶", "completed": "✓", "failed": "✗", "lost": "✗", "stopped": "■"}

# Runs in the page with the hidden box's JSON; sets the title, notifies on a new end. It observes the
# states it was told and keeps them in window.__ftsRunStates (a page reload starts afresh: no notice
# for the ends it did not see happen).
NOTICE_JS = """
(payload) => {
  let data = {};
  try { data = JSON.parse(payload || "{}"); } catch (e) { return; }
  if (!data.runs) { return; }
  if (data.title) { document.title = data.title; }
  const seen = (window.__ftsRunStates = window.__ftsRunStates || {});
  for (const run of data.runs) {
    const before = seen[run.run_id];
    seen[run.run_id] = run.state;
    const newEnd = run.ended && before !== undefined && before !== run.state && !data.end_states.includes(before);
    if (newEnd && "Notification" in window && Notification.permission === "granted") {
      new Notification(run.notice_title, {body: run.notice_body, tag: run.run_id + ":" + run.state});
    }
  }
}
"""


def _state_word(ctx: UIContext, lang: str, state: str) -> str:
    key = f"notice.state.{state}"
    return ctx.msg(lang, key) if key in ctx.texts else state


def _progress(ctx: UIContext, lang: str, status: dict) -> str:
    step, total = status.get("global_step"), status.get("max_steps")
    if status.get("state") == "queued" or step is None:
        return ctx.msg(lang, "notice.starting")
    return ctx.msg(lang, "notice.step", step=step, total=total) if total else ctx.msg(lang, "notice.step_only", step=step)


def run_states(ctx: UIContext) -> list[dict]:
    """The runs the page watches: the live ones and those ended in the last day, newest first, each
    status.json after the store's lost detection."""
    now, runs = time.time(), []
    for run_dir in ctx.store.run_dirs():
        try:
            status = ctx.store.refresh(run_dir.name)
        except (RunError, OSError):
            continue
        state = status.get("state")
        live = state == "running" or (state == "queued" and status.get("pid"))
        if live or (state in END_STATES and now - (status.get("ended_at") or 0) < RECENT_S):
            runs.append({**status, "run_id": run_dir.name})
    return sorted(runs, key=lambda s: s.get("started_at") or s.get("created_at") or 0, reverse=True)


def notice(ctx: UIContext, lang: str) -> str:
    """The hidden box's JSON: the page title (the running run's state, else the latest end) and
    each watched run's state with the Notification's title and text for an end."""
    runs = run_states(ctx)
    focus = next((s for s in runs if s.get("state") not in END_STATES), None)
    if focus is None and runs:
        focus = max(runs, key=lambda s: s.get("ended_at") or 0)
    title = APP
    if focus is not None:
        state = focus["state"]
        word = _state_word(ctx, lang, state) if state in END_STATES else _progress(ctx, lang, focus)
        title = f"{MARKS.get(state, '')} {word} · {APP}".strip()
    told = []
    for status in runs:
        state, ended = status["state"], status["state"] in END_STATES
        entry = {"run_id": status["run_id"], "state": state, "ended": ended}
        if ended:
            entry["notice_title"] = ctx.msg(lang, "notice.ended", run_id=status["run_id"],
                                            state=_state_word(ctx, lang, state))
            error = Message.from_dict(status.get("error_message")) or status.get("error")
            entry["notice_body"] = localize(error, lang) if error else _progress(ctx, lang, {**status, "state": "running"})
        told.append(entry)
    return json.dumps({"title": title, "runs": told, "end_states": list(END_STATES)}, ensure_ascii=False)


def build(ctx: UIContext) -> None:
    """Placed once by the shell: the hidden box, its timer and the page's script."""
    box = gr.Textbox(visible="hidden", elem_id="run-notice")
    private = {"api_visibility": "private"}
    gr.Timer(TICK_S).tick(lambda lang: notice(ctx, lang), ctx.lang, box, show_progress="hidden",
                          trigger_mode="always_last", **private)
    box.change(None, box, None, js=NOTICE_JS, **private)
