"""The Chat tab's votes as training data: "Save votes as a preference dataset"
and "Train on these votes" (a dpo run prefilled in the Train tab).

The handlers are plain functions over plain values (unit-tested in
tests/test_pref_votes.py); `build` only places the components and wires them.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from backend.chat.vote_data import VoteDataError, default_dataset_name, preference_run_values, save_votes_dataset
from ui.context import UIContext
from ui.i18n import localize
from ui.texts.vote_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)


def default_name(run_ids: list[str] | None) -> str:
    return default_dataset_name(run_ids[0]) if run_ids else "votes"


def save_votes(ctx: UIContext, lang: str, run_ids: list[str] | None, name: str) -> str:
    """Write the votes of the one chosen run as workspace dataset `name`; a message either way."""

    if not run_ids or len(run_ids) != 1:
        return ctx.msg(lang, "chat.msg_votes_pick_run")
    name = (name or "").strip() or default_name(run_ids)
    try:
        _, info = save_votes_dataset(ctx.workspace.runs_dir / run_ids[0], ctx.workspace.datasets_dir, name,
                                     overwrite=True)
    except VoteDataError as error:
        return ctx.msg(lang, "chat.msg_votes_error", error=localize(error, lang))
    return ctx.msg(lang, "chat.msg_votes_saved", pairs=info["pairs"], votes=info["votes"], run=run_ids[0], name=name,
                   ties=info.get("skipped_ties", 0), single=info.get("skipped_single", 0),
                   old=info.get("skipped_no_answers", 0), same=info.get("skipped_answers", 0),
                   context=info.get("skipped_context", 0))


def train_on_votes(ctx: UIContext, lang: str, run_ids: list[str] | None, name: str) -> tuple[str, dict | None]:
    """Save the votes, then (message, RunConfig values for the Train form) or (message, None)."""

    message = save_votes(ctx, lang, run_ids, name)
    if message.startswith("⚠️") or not run_ids or len(run_ids) != 1:
        return message, None
    name = (name or "").strip() or default_name(run_ids)
    values = preference_run_values(ctx.workspace.runs_dir / run_ids[0], name)
    checkpoint = Path(values.get("init_adapter") or values["model_name_or_path"]).name
    return message + "  \n" + ctx.msg(lang, "chat.msg_votes_train", name=name, checkpoint=checkpoint), values


def train_outputs(ctx: UIContext, lang: str, run_ids: list[str] | None, name: str) -> tuple:
    """(message, Train form prefill, tab switch): to the Train tab only when the votes made a run."""
    import gradio as gr

    text, values = train_on_votes(ctx, lang, run_ids, name)
    if values is None:
        return text, gr.update(), gr.update()
    return text, values, gr.Tabs(selected="train")


def build(ctx: UIContext, runs) -> None:
    import gradio as gr

    private = {"api_visibility": "private"}
    with gr.Accordion(ctx.t("chat.votes_title"), open=False, elem_id="chat-votes"):
        with gr.Row(equal_height=True):
            name = gr.Textbox(label=ctx.t("chat.votes_name"), placeholder="votes-RUN", scale=2,
                              elem_id="chat-votes-name")
            save = gr.Button(ctx.t("chat.votes_save"), scale=1, elem_id="chat-votes-save")
            train = gr.Button(ctx.t("chat.votes_train"), variant="primary", scale=1, elem_id="chat-votes-train")
        message = gr.Markdown(elem_id="chat-votes-message")
    save.click(partial(save_votes, ctx), [ctx.lang, runs, name], message, **private)
    prefill, tabs = ctx.shared.get("train_prefill"), ctx.shared.get("tabs")
    if prefill is not None and tabs is not None:
        train.click(partial(train_outputs, ctx), [ctx.lang, runs, name], [message, prefill, tabs], **private)
