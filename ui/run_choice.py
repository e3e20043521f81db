"""The single-run dropdowns (Runs, Evaluate, Export, the Serve panel), refreshed from
the workspace's runs by one rule: the runs as the choices, in the order given
(newest first), and as the value the run shown until now while it still
exists, else the first of the preferred runs (the Runs tab: the live ones),
else the newest; None without runs. The Runs tab also passes the runs it listed
last: a live run started since then is watched before the one shown."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from backend.runs.files import list_run_ids


def chosen_run(ids: Sequence[str], current: str | None, preferred: Sequence[str] = (),
               known: Sequence[str] | None = None) -> str | None:
    """With `known` (the ids the page listed last), a preferred run not among them (one started
    since: the newest first) comes before the run shown until now."""
    started = [i for i in preferred if known is not None and i not in known]
    if started:
        return started[0]
    if current in ids:
        return current
    return (list(preferred) or list(ids) or [None])[0]


def run_dropdown(ids: Sequence[str], current: str | None, preferred: Sequence[str] = ()) -> tuple[Any, str | None]:
    """(the dropdown's gr.update, the run it now shows)."""
    import gradio as gr

    chosen = chosen_run(ids, current, preferred)
    return gr.update(choices=list(ids), value=chosen), chosen


def run_folder(workspace, run_id: str | None) -> Path | None:
    """The run's folder when `run_id` is one of the workspace's runs (ids come from the page)."""

    if not run_id or run_id not in list_run_ids(workspace.runs_dir):
        return None
    return workspace.runs_dir / run_id


def refreshed_checkpoints(choices: Sequence[str], default: Any, current: Any, seen: dict | None) -> tuple[Any, dict]:
    """(the checkpoint list's gr.update, what the next refresh compares with) for a list read from
    disk again: nothing while its choices and default are those `seen` last; else the new choices,
    and the value shown kept while it is offered, unless it was the default offered before (the
    user left it), which moves to the new default: a run that went on or ended offers its best
    checkpoint or final/, not the one that was newest when the page opened."""
    import gradio as gr

    now = {"choices": list(choices), "default": default}
    if now == seen:
        return gr.skip(), seen
    picked = list(current or []) if isinstance(default, list) else current
    offered = set(picked) <= set(choices) if isinstance(picked, list) else picked in choices
    keep = picked and offered and not (seen and picked == seen.get("default"))
    if keep:
        # Choices only: `current` is the value when the tick was sent; on a busy machine the user may
        # have ticked boxes since, and writing it back would undo those clicks.
        return gr.update(choices=list(choices)), now
    return gr.update(choices=list(choices), value=default), now
