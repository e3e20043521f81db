"""Stop and Resume, shared by the Train and Runs tabs (both show the buttons).

Plain functions over the UI context, the language and a run id, tested
without a browser; the messages are this module's own, so a tab that wires
the buttons needs no other tab's texts.
"""

from __future__ import annotations

from backend.runs import queue
from backend.runs.store import RunError
from ui.context import UIContext
from ui.i18n import localize
from ui.texts.run_actions_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)


def _msg(lang: str | None, key: str, **values) -> str:
    entry = TEXT[f"run_actions.{key}"]
    return (entry.get(lang or "en") or entry["en"]).format(**values)


def stop(ctx: UIContext, lang: str | None, run_id: str | None) -> str:
    """Ask the run's worker to end, and say how it will (RunStore.stop: at once before its first step, else
    with a checkpoint at the step's end; the app's one RunStore escalates after the grace period); a run
    still waiting in the queue is cancelled instead."""
    if not run_id:
        return _msg(lang, "no_run")
    try:
        if ctx.store.get(run_id).waiting:
            queue.cancel(ctx.store, run_id)
            return _msg(lang, "cancelled", run_id=run_id)
        outcome = ctx.store.stop(run_id)
    except RunError as error:
        return _msg(lang, "refused", error=localize(error, lang))
    return _msg(lang, "stopping", run_id=run_id, what=localize(outcome, lang))


def resume(ctx: UIContext, lang: str | None, run_id: str | None) -> str:
    if not run_id:
        return _msg(lang, "no_run")
    try:
        ctx.store.resume(run_id)
    except RunError as error:
        return _msg(lang, "refused", error=localize(error, lang))
    return _msg(lang, "resumed", run_id=run_id)
