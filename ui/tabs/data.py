"""Data tab: upload or pick data, see its detected format and column mapping,
read it as conversations, see what the checks found, fix it in a click and
save it as a named workspace dataset with a train / eval split.

The work is in backend/data/prepare.py (a file read once, fixed, checked and
saved from memory); the context's data sessions (ui/data_session.py) keep the
open files between events; this module builds components and turns results
into component values. Page turns, a check's rows and saving reuse the last
analysis. A file that cannot be used leaves everything on screen as it was and
says what is wrong.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import gradio as gr

from backend.config import OVERFLOW, RunConfig
from backend.config_recipes import recipe_config
from backend.data.errors import DataError
from backend.data.fix_table import BY_KEY as FIX_BY_KEY
from backend.data.fix_table import FIXES
from backend.data.identity_rows import identity_note, identity_values
from backend.storage.safe_names import clean_name
from ui import data_session as ds
from ui import forms
from ui.context import UIContext
from ui.i18n import localize
from ui.texts.data_texts import TEXT  # noqa: F401  (TEXT is this tab's contract with the shell)
from ui.views.data_view import conversations_html, template_preview_html, token_histogram

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
PRIVATE = {"api_visibility": "private"}
DEFAULT_MODEL = RunConfig().model_name_or_path  # whose tokenizer counts tokens when none is named


def _recipe_model(ctx: UIContext) -> str:
    """The model the Train form starts with in this app (app.py --recipe)."""

    return recipe_config(ctx.recipe).model_name_or_path


def new_state(path: str, model: str, cutoff: int, overflow: str = "truncate", identity: dict | None = None) -> dict:
    return {"path": str(path), "mapping": None, "plan": {}, "model": model or DEFAULT_MODEL, "cutoff": int(cutoff or 256),
            "overflow": overflow or "truncate", "identity": dict(identity or {})}


def run_identity(ctx: UIContext, form: dict | None) -> dict[str, str]:
    """What the run fills {{name}} / {{author}} with: the Train form's identity_name / identity_author
    (`form`, the shared "identity" state), or the values the form starts with before any edit."""
    return identity_values(form if form is not None else forms.form_defaults(ctx))


# ---------------------------------------------------------------- views (plain values)

def render(ctx: UIContext, lang: str, state: dict, page: int = 1, read: bool = False, step=None) -> dict[str, Any]:
    """Everything the tab shows for `state`, keyed by component name; `read`: read the file (again)
    first, else work on the rows its session holds; `step(name, **values)` hears each slow part as it
    begins (steps_for). Raises DataError / ValueError."""
    if read:
        if step is not None:
            step("read", file=Path(state["path"]).name)
        state = ctx.data_sessions.open(state)
    a = ctx.data_sessions.analyse(ctx.workspace, state, step)
    names = a.placeholder_names()
    out = {
        "state": state,
        **page_values(ctx, lang, a, page, ctx.data_sessions.template_view(state)),
        "mapping": ", ".join(f"{k}={v}" for k, v in a.shape_columns.items()),
        "columns": ctx.msg(lang, "data.columns_found", columns=", ".join(a.file_columns) or "-"),
        "summary": summary_table(ctx, lang, a.report),
        "histogram": histogram(ctx, lang, a.report),
        "fill": "\n".join(f"{n}={state.get('plan', {}).get('fill', {}).get(n, '')}" for n in names),
        "applied": applied_text(ctx, lang, a),
        "check_rows": "",
        "save_name": default_name(a.label),
        "empty": gr.update(visible=False),
        "report_box": gr.update(visible=True),
    }
    counts = {c["id"]: c["count"] for c in a.report["checks"]}
    for fix in FIXES:
        n = counts.get(fix.checks[0], 0) if fix.checks else None
        label = ctx.msg(lang, fix.text_key) + (f" ({n})" if n is not None else "")
        out[f"fix:{fix.key}"] = gr.update(value=label, interactive=n is None or n > 0)
    return out


def template_html(ctx: UIContext, lang: str, preview: dict | None) -> str:
    """The first row through the chat template, trained tokens marked, the EOS after each answer."""
    if not preview:
        return ""
    eos = f"{preview['eos_token']} (id {preview['eos_token_id']})"
    turns = [ctx.msg(lang, "data.template.turn_ok" if turn["ends_with_eos"] else "data.template.turn_bad",
                     turn=n, tokens=turn["tokens"], eos=eos, last=turn["last"]) for n, turn in enumerate(preview["turns"], 1)]
    title = ctx.msg(lang, "data.template.title", row=preview["row"], template=preview["template"], trained=preview["trained_tokens"],
                    tokens=preview["tokens"])
    return template_preview_html(preview, title, ctx.msg(lang, "data.template.legend"), turns)


def page_values(ctx: UIContext, lang: str, a: ds.Analysis, page: int, template: dict | None = None) -> dict[str, Any]:
    """The preview of one page and the status line: all a page turn shows, from the rows in memory;
    `template`: the first row's template preview, shown above the page."""
    rows, page, pages = ds.page_view(a, page)
    return {
        "status": status_text(ctx, lang, a),
        "preview": template_html(ctx, lang, template) + conversations_html(
            [(ctx.msg(lang, "data.row", row=r), m, []) for r, m in rows], ctx.msg(lang, "data.no_rows")),
        "page": page,
        "page_info": ctx.msg(lang, "data.page_of", page=page, pages=pages, rows=len(a.rows)),
    }


def status_text(ctx: UIContext, lang: str, a: ds.Analysis) -> str:
    r = a.report
    summary = r.get("summary", {})
    text = ctx.msg(lang, "data.status", label=display_name(ctx, a.label), detected=localize(a.detected, lang), rows=a.total, usable=len(a.rows),
                   errors=summary.get("error", 0), warnings=summary.get("warning", 0))
    filled = next((c["count"] for c in r["checks"] if c["id"] == "identity_fill"), 0)
    if filled:  # {{name}} / {{author}} are the Train form's to fill: no error, and the rows shown are filled
        text += "\n\n" + localize(identity_note(a.identity, filled), lang)
    if r.get("token_lengths"):
        t = r["token_lengths"]
        text += "\n\n" + ctx.msg(lang, "data.tokens", model=r.get("model") or "-", mean=round(t["mean"]), p50=t["p50"],
                                 p90=t["p90"], p99=t["p99"], max=t["max"], cutoff=t["cutoff_len"], over=t["over_cutoff"])
    return text


def display_name(ctx: UIContext, label: str) -> str:
    """An upload is shown by its file name, not by the temporary folder gradio stored it in."""

    uploads = (ctx.workspace.root / ".uploads").resolve()
    return Path(label).name if ctx.workspace.contains(label) and uploads in Path(label).resolve().parents else label


def summary_table(ctx: UIContext, lang: str, report: dict):
    import pandas as pd  # gradio already imports it

    rows = []
    for c in sorted(report["checks"], key=lambda c: (SEVERITY_ORDER[c["severity"]], -c["count"])):
        rows.append([ctx.msg(lang, "data.sev." + c["severity"]), c["id"],
                     c["count"], _text(ctx, lang, f"data.check.{c.get('text_id') or c['id']}", c["title"])])
    columns = [ctx.msg(lang, k) for k in ("data.col.severity", "data.col.check", "data.col.count", "data.col.meaning")]
    return pd.DataFrame(rows, columns=columns)


def _text(ctx: UIContext, lang: str, key: str, fallback: str) -> str:
    return ctx.msg(lang, key) if key in ctx.texts else fallback


def histogram(ctx: UIContext, lang: str, report: dict):
    return token_histogram(report.get("token_lengths"), ctx.msg(lang, "data.hist.title"), ctx.msg(lang, "data.hist.x"),
                           ctx.msg(lang, "data.hist.y"), "cutoff_len")


def applied_text(ctx: UIContext, lang: str, a: ds.Analysis) -> str:
    if not a.steps:
        return ctx.msg(lang, "data.no_fixes")
    lines = [ctx.msg(lang, "data.applied_head", before=a.total, after=len(a.rows))]
    lines += [f"- `{s['id']}`: " + ctx.msg(lang, "data.applied_step", changed=s["changed"], removed=s["removed"])
              for s in a.steps]
    lines += ["", *("⚠️ " + localize(warning, lang) for warning in a.warnings)] if a.warnings else []
    return "\n".join(lines)


def default_name(label: str) -> str:
    return clean_name(str(label).rsplit("/", 1)[-1].rsplit(".", 1)[0], "dataset") + "-clean"


def error_text(ctx: UIContext, lang: str, error: Exception) -> str:
    return "⚠️ " + ctx.msg(lang, "data.error", problem=localize(error, lang))


# ---------------------------------------------------------------- handlers (tested directly)

# `identity` below: the shared "identity" state, the Train form's identity_name / identity_author
# (None: the values the form starts with); the rows are checked and shown as the run fills them.

def steps_for(ctx: UIContext, lang: str, progress) -> Any:
    """step(name, **values) that shows a first look's parts in gradio's progress bar: "reading FILE"
    (1 of 3), "loading the tokenizer of MODEL", "checking N rows": a long wait says what it waits for."""
    order = ("read", "tokenizer", "checks")

    def step(name: str, **values) -> None:
        progress((order.index(name), len(order)), desc=ctx.msg(lang, f"data.step.{name}", **values))
    return step


def open_upload(ctx: UIContext, lang: str, file: str | None, model: str, cutoff: int, state: dict | None,
                overflow: str = "truncate", identity: dict | None = None, step=None):
    if not file:
        return {"status": ctx.msg(lang, "data.pick_first")}
    return _safe(ctx, lang, lambda: render(ctx, lang, new_state(file, model, cutoff, overflow,
                                                                run_identity(ctx, identity)), read=True, step=step))


def open_dataset(ctx: UIContext, lang: str, name: str | None, model: str, cutoff: int, state: dict | None,
                 overflow: str = "truncate", identity: dict | None = None, step=None):
    if not name:
        return {"status": ctx.msg(lang, "data.pick_first")}
    return _safe(ctx, lang, lambda: render(ctx, lang, new_state(ds.dataset_source(ctx.workspace, name), model, cutoff,
                                                                overflow, run_identity(ctx, identity)), read=True,
                                           step=step))


def recheck(ctx: UIContext, lang: str, state: dict | None, model: str, cutoff: int, mapping_text: str,
            overflow: str = "truncate", identity: dict | None = None):
    if not state:
        return {"status": ctx.msg(lang, "data.pick_first")}

    def run():
        mapping = ds.parse_pairs(mapping_text, ctx.msg(lang, "data.mapping"))
        return render(ctx, lang, {**state, "model": model or DEFAULT_MODEL, "cutoff": int(cutoff or 256),
                                  "overflow": overflow or "truncate", "mapping": mapping or None,
                                  "identity": run_identity(ctx, identity)},
                      read=True)  # "Check again" sees an edited file and the Train form's values now
    return _safe(ctx, lang, run)


def relabel(ctx: UIContext, lang: str, state: dict | None):
    """The tab in another language: the same analysis, not read or checked again."""
    if not state:
        return {"state": gr.skip()}
    return _safe(ctx, lang, lambda: render(ctx, lang, state))


def apply_fix(ctx: UIContext, lang: str, state: dict | None, key: str, fill_text: str):
    if not state:
        return {"status": ctx.msg(lang, "data.pick_first")}

    def run():
        field, value = _fix_target(key)
        if field == "fill":
            value = ds.parse_pairs(fill_text, ctx.msg(lang, "data.fill"))
            if not value:
                raise ValueError(ctx.msg(lang, "data.fill_empty"))
        plan = {**state.get("plan", {}), field: value}
        return render(ctx, lang, {**state, "plan": plan})
    return _safe(ctx, lang, run)


def undo_fixes(ctx: UIContext, lang: str, state: dict | None):
    if not state:
        return {"status": ctx.msg(lang, "data.pick_first")}
    return _safe(ctx, lang, lambda: render(ctx, lang, {**state, "plan": {}}))


def show_check(ctx: UIContext, lang: str, state: dict | None, check_id: str) -> str:
    if not state or not check_id:
        return ""
    try:
        a = ctx.data_sessions.analyse(ctx.workspace, state)
    except (DataError, ValueError) as error:
        return f"<p>{error_text(ctx, lang, error)}</p>"
    items = [(ctx.msg(lang, "data.row", row=r), m, notes) for r, m, notes in ds.check_rows_view(a, check_id, lang=lang)]
    check = next((c for c in a.report["checks"] if c["id"] == check_id), {"id": check_id, "title": check_id})
    title = _text(ctx, lang, f"data.check.{check.get('text_id') or check_id}", check.get("title") or check_id)
    head = f"<h4>{html.escape(title)}</h4>"  # the check's title in the user's language, not its id
    return head + conversations_html(items, ctx.msg(lang, "data.check_clean"))


def turn_page(ctx: UIContext, lang: str, state: dict | None, page: int):
    if not state:
        return {"status": ctx.msg(lang, "data.pick_first")}
    return _safe(ctx, lang, lambda: page_values(ctx, lang, ctx.data_sessions.analyse(ctx.workspace, state), page,
                                                ctx.data_sessions.template_view(state)))


def save_dataset(ctx: UIContext, lang: str, state: dict | None, name: str, eval_ratio: float, seed: int,
                 overwrite: bool):
    """Returns (message, saved name or None)."""
    if not state:
        return ctx.msg(lang, "data.pick_first"), None
    try:
        a = ctx.data_sessions.analyse(ctx.workspace, state)
        folder = a.save(ctx.workspace.datasets_dir, (name or "").strip(), eval_ratio, seed, overwrite)
    except (DataError, ValueError, FileExistsError) as error:
        return error_text(ctx, lang, error), None
    meta_split = (folder / "meta.json").read_text(encoding="utf-8")

    split = json.loads(meta_split)["split"]
    ctx.remember(dataset=folder.name)
    return ctx.msg(lang, "data.saved", name=folder.name, train=split["train_rows"], eval=split["eval_rows"]), folder.name


def _fix_target(key: str) -> tuple[str, Any]:
    """The FixPlan field and value a fix button sets."""
    fix = FIX_BY_KEY[key]
    return fix.option, fix.value


def _safe(ctx: UIContext, lang: str, fn) -> dict:
    try:
        return fn()
    except (DataError, ValueError) as error:
        return {"status": error_text(ctx, lang, error)}




def api_check(ctx: UIContext, file: str | None, model: str, cutoff: int) -> dict:
    """Public API /check_dataset: the check report of an uploaded file (as `python -m backend.data check --json`)."""
    if not file:
        return {"error": "Send a data file (gradio_client.handle_file(path))."}
    from backend.data.checks import check_file

    try:
        tokenizer = ds.load_tokenizer(ctx.workspace, model or None)
        report = check_file(file, tokenizer=tokenizer, model=model or None, cutoff_len=int(cutoff or 256),
                            identity=identity_values(RunConfig()))  # the command line's default values
    except (DataError, ValueError) as error:
        return {"error": str(error)}
    return report.to_dict()


# ---------------------------------------------------------------- components and wiring

OUT_KEYS = ("state", "status", "mapping", "columns", "summary", "histogram", "fill", "applied", "preview", "page",
            "page_info", "check_rows", "save_name", "empty", "report_box", *(f"fix:{fix.key}" for fix in FIXES))


def build(ctx: UIContext) -> None:
    ws, t = ctx.workspace, ctx.t
    last = ctx.saved().get("data", {})
    c: dict[str, Any] = {"state": gr.State(None)}
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=320):
            gr.Markdown(t("data.source"))
            upload = gr.File(label=t("data.upload"), type="filepath", elem_id="data-upload",
                             file_types=[".json", ".jsonl", ".csv", ".tsv", ".parquet"])
            with gr.Row():
                names = ds.workspace_datasets(ws)
                last_saved = ctx.saved().get("dataset")  # the dataset used last time, preselected
                pick = gr.Dropdown(choices=names, value=last_saved if last_saved in names else None, label=t("data.pick"),
                                   elem_id="data-pick", scale=3)
                refresh = gr.Button(t("data.refresh"), size="sm", scale=1)
            with gr.Accordion(t("data.counting"), open=False):
                model = gr.Dropdown(choices=ds.local_models(ws), value=last.get("model", _recipe_model(ctx)),
                                    allow_custom_value=True,
                                    label=t("data.model"), elem_id="data-model")
                cutoff = gr.Number(value=last.get("cutoff", 256), minimum=16, maximum=131072, precision=0,
                                   label=t("data.cutoff"), elem_id="data-cutoff")
                overflow = gr.Radio(choices=list(OVERFLOW), value=last.get("overflow", "truncate"),
                                    label=t("data.overflow"), elem_id="data-overflow")
            c["mapping"] = gr.Textbox(label=t("data.mapping"), info=t("data.mapping_help"), elem_id="data-mapping")
            c["columns"] = gr.Markdown(elem_id="data-columns")
            check = gr.Button(t("data.check_btn"), elem_id="data-check")
        with gr.Column(scale=3):
            c["status"] = gr.Markdown(t("data.pick_first"), elem_id="data-status")
            gr.Markdown(t("data.report"))
            # Until a file is checked: one sentence instead of a headerless table and an empty chart frame.
            c["empty"] = gr.Markdown(t("data.empty"), elem_id="data-empty")
            with gr.Column(visible=False) as c["report_box"]:
                c["summary"] = gr.Dataframe(interactive=False, wrap=True, elem_id="data-summary", max_height=420)
                gr.Markdown(t("data.report_help"))
                c["histogram"] = gr.Plot(elem_id="data-histogram", show_label=False)
    c["check_rows"] = gr.HTML(elem_id="data-check-rows")
    with gr.Accordion(t("data.preview"), open=True):
        with gr.Row(equal_height=True):
            prev = gr.Button(t("data.prev"), size="sm", scale=0)
            c["page"] = gr.Number(value=1, precision=0, minimum=1, label=t("data.page"), scale=0, min_width=90)
            nxt = gr.Button(t("data.next"), size="sm", scale=0)
            c["page_info"] = gr.Markdown(elem_id="data-page-info")
        c["preview"] = gr.HTML(elem_id="data-preview")
    gr.Markdown(t("data.fixes"))
    gr.Markdown(t("data.fixes_help"))
    with gr.Row():
        c["fill"] = gr.Textbox(lines=3, label=t("data.fill"), elem_id="data-fill", scale=1)
        c["applied"] = gr.Markdown(elem_id="data-applied")
    fix_buttons = {}
    with gr.Row(elem_id="data-fix-buttons"):
        for fix in FIXES:
            fix_buttons[fix.key] = c[f"fix:{fix.key}"] = gr.Button(t(fix.text_key), size="sm", interactive=False,
                                                                   elem_id=f"data-fix-{fix.key}", min_width=120)
        undo = gr.Button(t("data.undo"), size="sm", variant="stop", elem_id="data-undo", min_width=120)
    gr.Markdown(t("data.save"))
    with gr.Row(equal_height=True):
        c["save_name"] = gr.Textbox(label=t("data.save_name"), elem_id="data-save-name")
        eval_ratio = gr.Slider(0, 0.5, value=0.1, step=0.01, label=t("data.eval_ratio"), elem_id="data-eval-ratio")
        seed = gr.Number(value=42, precision=0, label=t("data.seed"))
        overwrite = gr.Checkbox(label=t("data.overwrite"))
        save = gr.Button(t("data.save_btn"), variant="primary", elem_id="data-save")
    saved = gr.Markdown(elem_id="data-saved")
    _wire(ctx, c, upload, pick, refresh, (model, cutoff, overflow), check, prev, nxt, fix_buttons, undo,
          (eval_ratio, seed, overwrite, save, saved))
    _public_api(ctx)


def _wire(ctx, c, upload, pick, refresh, counting, check, prev, nxt, fix_buttons, undo, saving) -> None:
    lang, state = ctx.lang, c["state"]
    model, cutoff, overflow = counting  # the tokenizer, cutoff_len and overflow the checks count with
    identity = ctx.shared.get("identity") or gr.State(None)  # the Train form's identity_name / identity_author
    outs = [c[k] for k in OUT_KEYS]

    def to_components(values: dict) -> dict:
        return {c[k]: v for k, v in values.items() if k in c}

    def remember(m, n, o):
        ctx.remember(data={"model": m or _recipe_model(ctx), "cutoff": int(n or 256), "overflow": o or "truncate"})

    def do_upload(lg, f, m, n, s, o, i, progress=gr.Progress()):
        return to_components(open_upload(ctx, lg, f, m, n, s, o, i, steps_for(ctx, lg, progress)))

    def do_open(lg, name, m, n, s, o, i, progress=gr.Progress()):
        return to_components(open_dataset(ctx, lg, name, m, n, s, o, i, steps_for(ctx, lg, progress)))

    upload.upload(do_upload, [lang, upload, model, cutoff, state, overflow, identity], outs, **PRIVATE)
    pick.input(do_open, [lang, pick, model, cutoff, state, overflow, identity], outs, **PRIVATE)
    for trigger in (refresh.click, pick.focus):
        trigger(lambda: gr.update(choices=ds.workspace_datasets(ctx.workspace)), None, pick, **PRIVATE)
    check.click(lambda lg, s, m, n, mp, o, i: to_components(recheck(ctx, lg, s, m, n, mp, o, i)),
                [lang, state, model, cutoff, c["mapping"], overflow, identity], outs,
                **PRIVATE).then(remember, [model, cutoff, overflow], None, **PRIVATE)
    lang.change(lambda lg, s: to_components(relabel(ctx, lg, s)), [lang, state], outs, **PRIVATE)
    for key, button in fix_buttons.items():
        button.click(lambda lg, s, fill, key=key: to_components(apply_fix(ctx, lg, s, key, fill)),
                     [lang, state, c["fill"]], outs, **PRIVATE)
    undo.click(lambda lg, s: to_components(undo_fixes(ctx, lg, s)), [lang, state], outs, **PRIVATE)
    c["summary"].select(_on_select(ctx), [lang, state], c["check_rows"], **PRIVATE)
    page_outs = [c["preview"], c["page"], c["page_info"], c["status"]]
    for trigger, step in ((prev.click, -1), (nxt.click, 1), (c["page"].submit, 0)):
        trigger(lambda lg, s, p, step=step: to_components(turn_page(ctx, lg, s, int(p or 1) + step)),
                [lang, state, c["page"]], page_outs, **PRIVATE)
    eval_ratio, seed, overwrite, save, saved = saving
    shared = ctx.shared.get("dataset") or gr.State(None)

    def do_save(lg, s, name, ratio, sd, ow, current):
        message, saved_name = save_dataset(ctx, lg, s, name, ratio, sd, ow)
        choices = ds.workspace_datasets(ctx.workspace)
        return message, saved_name or current, gr.update(choices=choices, value=saved_name or None)

    save.click(do_save, [lang, state, c["save_name"], eval_ratio, seed, overwrite, shared], [saved, shared, pick],
               **PRIVATE)


def _on_select(ctx: UIContext):
    def on_select(lg: str, s: dict | None, evt: gr.SelectData) -> str:
        row = evt.row_value or []
        check_id = row[1] if len(row) > 1 else None
        return show_check(ctx, lg, s, check_id)
    return on_select


def _public_api(ctx: UIContext) -> None:
    """The documented API (docs/API in the report): hidden components, public endpoints."""
    with gr.Group(visible=False):
        file = gr.File(type="filepath", label="file")
        model = gr.Textbox(value="demo", label="model")
        cutoff = gr.Number(value=256, precision=0, label="cutoff_len")
        report = gr.JSON(label="report")
        names = gr.JSON(label="datasets")
        check_trigger = gr.Button("check", visible=False)
        list_trigger = gr.Button("list", visible=False)

    def check_dataset(file: str | None, model: str, cutoff_len: int) -> dict:
        return api_check(ctx, file, model, cutoff_len)

    def list_datasets() -> list[str]:
        return ds.workspace_datasets(ctx.workspace)

    check_trigger.click(check_dataset, [file, model, cutoff], report, api_name="check_dataset", api_visibility="public")
    list_trigger.click(list_datasets, None, names, api_name="list_datasets", api_visibility="public")
