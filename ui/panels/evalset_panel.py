"""An eval set from a one-line description, inside the Judge section (Kiln's
eval builder): the judge endpoint above writes N test prompts with what a good
answer must contain (backend/judge/evalset.py); they land in an editable
table, and only the rows the user kept, as edited, are saved as a workspace
dataset, which Evaluate and Train then offer like any other.

Handlers are module-level functions over plain values, tested without a
browser; build() only places and wires.
"""

from __future__ import annotations

from functools import partial

import gradio as gr

from backend.judge.client import DEFAULT_MAX_TOKENS, JudgeClient, JudgeEndpoint
from backend.judge.evalset import MAX_PROMPTS, save_evalset, write_evalset
from backend.messages import UserError
from ui.context import UIContext
from ui.i18n import localize
from ui.texts.evalset_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)

TOKENS_PER_PROMPT = 80  # a prompt and its expected properties, as JSON: ten rows need more than one answer's default
COLUMNS = ("prompt", "expected")

def endpoint(url, model, key, count) -> JudgeEndpoint:
    tokens = max(DEFAULT_MAX_TOKENS, TOKENS_PER_PROMPT * int(count or 1))
    return JudgeEndpoint(str(url or "").strip(), str(model or "").strip(), str(key or "") or None, max_tokens=tokens)


def asking(ctx: UIContext, lang, url, model, key, count) -> str:
    """What the wait is for, shown before the one call starts."""
    where = endpoint(url, model, key, count)
    return ctx.msg(lang, "evalset.asking", model=where.model or "?", url=where.base_url, n=int(count or 0),
                   timeout=where.timeout_s)


def write_rows(ctx: UIContext, lang, url, model, key, description, count):
    """(what happened, the rows as [prompt, expected] for the table)."""
    try:
        rows = write_evalset(JudgeClient(endpoint(url, model, key, count)), str(description or ""), int(count or 0))
    except UserError as error:
        return ctx.msg(lang, "evalset.error", error=localize(error, lang)), gr.skip()
    return ctx.msg(lang, "evalset.written", n=len(rows)), [[r["prompt"], r["expected"]] for r in rows]


def table_rows(table) -> list[dict]:
    """The table's rows as the user left them ({"prompt", "expected"}), whatever form gradio sends."""
    if hasattr(table, "values"):  # a pandas DataFrame
        values = table.values.tolist()
    elif isinstance(table, dict):  # {"headers", "data"}
        values = table.get("data") or []
    else:
        values = table or []
    return [{"prompt": str(row[0] or "").strip(), "expected": str(row[1] or "").strip() if len(row) > 1 else ""}
            for row in values if row]


def save_rows(ctx: UIContext, lang, name, table, description) -> str:
    name = str(name or "").strip()
    if not name:
        return ctx.msg(lang, "evalset.no_name")
    rows = table_rows(table)
    try:
        folder = save_evalset(ctx.workspace.datasets_dir, name, rows, str(description or ""))
    except UserError as error:
        return ctx.msg(lang, "evalset.error", error=localize(error, lang))
    return ctx.msg(lang, "evalset.saved", n=sum(bool(r["prompt"]) for r in rows), name=name, folder=folder)


def build(ctx: UIContext, url, model, key) -> None:
    """Inside the Judge section, with its endpoint fields."""

    private = {"api_visibility": "private"}
    with gr.Accordion(ctx.t("evalset.title"), open=False, elem_id="evalset"):
        with gr.Row(equal_height=True):
            description = gr.Textbox(label=ctx.t("evalset.description"), scale=4, elem_id="evalset-description")
            count = gr.Number(label=ctx.t("evalset.count"), value=10, minimum=1, maximum=MAX_PROMPTS, precision=0,
                              scale=1, elem_id="evalset-count")
        write = gr.Button(ctx.t("evalset.write"), elem_id="evalset-write")
        status = gr.Markdown(elem_id="evalset-status")
        table = gr.Dataframe(label=ctx.t("evalset.table"), headers=list(COLUMNS), interactive=True, wrap=True,
                             column_count=len(COLUMNS), column_limits=(len(COLUMNS), len(COLUMNS)),
                             elem_id="evalset-table")
        with gr.Row(equal_height=True):
            name = gr.Textbox(label=ctx.t("evalset.name"), elem_id="evalset-name")
            save = gr.Button(ctx.t("evalset.save"), elem_id="evalset-save")
    write.click(partial(asking, ctx), [ctx.lang, url, model, key, count], status, **private).then(
        partial(write_rows, ctx), [ctx.lang, url, model, key, description, count], [status, table], **private)
    save.click(partial(save_rows, ctx), [ctx.lang, name, table, description], status, **private)
