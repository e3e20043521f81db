"""Export tab: a checkpoint as its LoRA adapter (+ zip) or merged into the base
model as sharded safetensors, verified against the adapter; optionally GGUF
files for llama.cpp / Ollama, checked by running them in llama.cpp.

The export runs as a detached `python -m backend.export` process writing to
workspace/exports/<name>; the tab polls its progress file and then shows the
report (verification rows, notes) and the zip to download.
"""

from __future__ import annotations

import html
from functools import partial
from pathlib import Path

import gradio as gr

from backend.evaluation.results import checkpoint_choices, default_checkpoint
from backend.export.exporter import export_folder, recent_exports, start_export
from backend.export.gguf_export import size_preview
from backend.export.llama_cpp_tools import check_tools
from backend.export.model_card import run_config
from backend.export.outputs import ExportError
from backend.messages import Message
from backend.runs.files import list_run_ids
from backend.runs.jobs import COMPLETED, FAILED, read_progress, stage_of
from ui.context import UIContext
from ui.i18n import localize
from ui.local_model_choices import merge_bases
from ui.run_choice import refreshed_checkpoints, run_dropdown
from ui.texts.export_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)

POLL_EVERY_S = 2.0
SHARD_SIZES = ("500MB", "1GB", "2GB", "5GB", "10GB")
GGUF_LEVELS = ("q4_k_m", "q5_k_m", "q6_k", "q8_0", "f16", "bf16")
NO_LORA = "none"

VERIFICATION_COLUMNS = ("prompt", "expected", "exported", "outcome")
GGUF_COLUMNS = ("file", "mb", "equal", "agree", "kl", "top1")


# --- handlers (plain values in, component values out) -------------------------

def refresh_runs(ctx: UIContext, current, current_ckpt):
    """(run list, checkpoint list): the current choices kept while they exist, else the newest."""
    run, current = run_dropdown(list_run_ids(ctx.workspace.runs_dir), current)
    names = _checkpoints(ctx.workspace.runs_dir, current)
    chosen = current_ckpt if current_ckpt in names else _default(ctx.workspace.runs_dir, current)
    return run, gr.update(choices=names, value=chosen)


def refresh_checkpoints(ctx: UIContext, current, current_ckpt, seen):
    """(checkpoint list, what was seen): a timer's look at the run's checkpoints, so the list does not
    stay as it was when the page opened while the run goes on and ends (run_choice.refreshed_checkpoints)."""
    names = _checkpoints(ctx.workspace.runs_dir, current)
    return refreshed_checkpoints(names, _default(ctx.workspace.runs_dir, current), current_ckpt, seen)


def _default(runs_dir: Path, run_id: str | None) -> str | None:
    return default_checkpoint(runs_dir / run_id) if run_id and (runs_dir / run_id).is_dir() else None


def pick_run(ctx: UIContext, current, shown=None):
    """The run opened elsewhere: the checkpoint the user chose stays when it is the run already shown."""
    if current is not None and current == shown:
        return gr.skip(), gr.skip()
    return refresh_runs(ctx, current, None)


def describe(ctx: UIContext, lang, current, ckpt, export_kind, gguf_levels=()):
    """(default name, the notes that apply (QLoRA base, full run, GGUF sizes, GGUF bases not offered), the
    base dropdown's choices)."""
    if not current or not ckpt:
        return gr.skip(), "", gr.skip()
    config = _config(ctx.workspace.runs_dir / current)
    notes = []
    if config.get("method") == "qlora" and export_kind == "merged":
        notes.append(ctx.msg(lang, "export.note_qlora", bits=config.get("quantization_bits") or 4))
    if config.get("method") == "full":
        notes.append(ctx.msg(lang, "export.note_full"))
    if gguf_levels:
        notes.append(_gguf_sizes(ctx, lang, ctx.workspace.runs_dir / current / ckpt, gguf_levels))
    suffix = "merged" if export_kind == "merged" and config.get("method") != "full" else "adapter"
    suffix = "model" if config.get("method") == "full" else suffix
    trained_on = str(config.get("model_name_or_path") or "")
    bases, left_out = base_choices(ctx, lang, trained_on)
    if left_out and export_kind == "merged":
        notes.append(ctx.msg(lang, "export.base_gguf_left", count=left_out))
    return f"{current}-{ckpt}-{suffix}", "\n\n".join(notes), gr.update(choices=bases)


def base_choices(ctx: UIContext, lang, trained_on: str) -> tuple[list[tuple[str, str]], int]:
    """The base dropdown's choices: "" (where the run loaded it), then the bases found on this machine
    (read from the scan's cache); and how many GGUF models were left out, not converted yet."""
    found, left_out = merge_bases(ctx.workspace.root, ctx.workspace.models_dir)
    own = (ctx.msg(lang, "export.base_run", name=trained_on or "?"), "")
    return [own, *[(shown, path) for shown, path in found if path != trained_on]], left_out


def gguf_tools_note(ctx: UIContext, lang) -> str:
    """Why GGUF levels cannot be exported here (llama.cpp's tools missing, and how to get them), or ""."""
    try:
        check_tools()  # what the export itself checks first
    except ExportError as error:
        return ctx.msg(lang, "export.gguf_unavailable", reason=localize(error, lang))
    return ""


def start_job(ctx: UIContext, lang, current, ckpt, export_kind, export_name, shard_size, dtype_name, replace,
              want_zip, base_model, gguf_levels=(), gguf_lora=NO_LORA) -> tuple[str, str | None]:
    """Start `python -m backend.export` in the background: (message, its progress file or None)."""

    if not current or not ckpt:
        return ctx.msg(lang, "export.msg_pick"), None
    missing = gguf_tools_note(ctx, lang) if gguf_levels or gguf_lora not in (None, "", NO_LORA) else ""
    if missing:  # the export would fail at its GGUF step: refused before anything starts
        return missing, None
    try:
        out = export_folder(ctx.workspace, export_name)  # a typed name never probes outside exports/
    except ExportError as error:
        return ctx.msg(lang, "export.msg_error", error=localize(error, lang)), None
    if (out.exists() or out.with_name(out.name + ".zip").exists()) and not replace:
        return ctx.msg(lang, "export.msg_exists", path=out), None
    try:
        progress = start_export(ctx.workspace, ctx.workspace.runs_dir / current / ckpt, export_name,
                                merge=export_kind == "merged", shard_size=shard_size, dtype=dtype_name,
                                overwrite=bool(replace), make_zip=bool(want_zip), base=base_model or None,
                                gguf=list(gguf_levels or []) or None,
                                gguf_lora=None if gguf_lora in (None, "", NO_LORA) else gguf_lora)
    except ExportError as error:
        return ctx.msg(lang, "export.msg_error", error=localize(error, lang)), None
    return ctx.msg(lang, "export.msg_started", path=out), str(progress)


def poll(ctx: UIContext, lang, progress_file):
    """(report HTML, download button) of the export shown; nothing to change when there is none."""
    if not progress_file:
        return gr.skip(), gr.skip()
    return _report_view(ctx, lang, Path(progress_file))


# --- layout -------------------------------------------------------------------

def build(ctx: UIContext) -> None:
    c: dict = {}
    with gr.Row(equal_height=True):
        c["run"] = gr.Dropdown(label=ctx.t("export.run"), choices=[], scale=3, elem_id="export-run")
        c["checkpoint"] = gr.Dropdown(label=ctx.t("export.checkpoint"), choices=[], scale=2,
                                      elem_id="export-checkpoint")
        c["refresh"] = gr.Button(ctx.t("export.refresh"), scale=0, elem_id="export-refresh")
    c["kind"] = gr.Radio(label=ctx.t("export.kind"), value="merged", elem_id="export-kind",
                         choices=[(ctx.t("export.kind_merged"), "merged"), (ctx.t("export.kind_adapter"), "adapter")])
    c["note"] = gr.Markdown(elem_id="export-note")
    with gr.Row(equal_height=True):
        c["name"] = gr.Textbox(label=ctx.t("export.name"), scale=3, elem_id="export-name")
        c["shard"] = gr.Dropdown(label=ctx.t("export.shard_size"), choices=list(SHARD_SIZES), value="2GB", scale=1,
                                 elem_id="export-shard")
        c["dtype"] = gr.Dropdown(label=ctx.t("export.dtype"), choices=["auto", "bf16", "fp16", "fp32"], value="auto",
                                 scale=1, info=ctx.t("export.dtype_help"), elem_id="export-dtype")
    c["base"] = gr.Dropdown(label=ctx.t("export.base"), info=ctx.t("export.base_info"), choices=[("", "")], value="",
                            allow_custom_value=True, elem_id="export-base")  # a path string, as typed or picked
    with gr.Row():
        c["overwrite"] = gr.Checkbox(label=ctx.t("export.overwrite"), value=False, elem_id="export-overwrite")
        c["zip"] = gr.Checkbox(label=ctx.t("export.zip"), value=True, elem_id="export-zip")
    with gr.Row():
        c["gguf"] = gr.CheckboxGroup(label=ctx.t("export.gguf"), choices=list(GGUF_LEVELS), value=[], scale=3,
                                     elem_id="export-gguf")
        c["gguf_lora"] = gr.Dropdown(label=ctx.t("export.gguf_lora"), choices=[NO_LORA, "f16", "q8_0"],
                                     value=NO_LORA, scale=1, elem_id="export-gguf-lora")
    c["gguf_tools"] = gr.Markdown(elem_id="export-gguf-tools")  # llama.cpp's tools missing: said before Start
    c["start"] = gr.Button(ctx.t("export.start"), variant="primary", elem_id="export-start")
    c["status"] = gr.Markdown(elem_id="export-status")
    c["jobs"] = gr.Dropdown(label=ctx.t("export.jobs"), choices=[], elem_id="export-jobs")
    c["report"] = gr.HTML(elem_id="export-report")
    c["download"] = gr.DownloadButton(ctx.t("export.download"), visible=False, elem_id="export-download")
    c["job"] = gr.State(None)  # the progress file of the export shown (one from exports/.jobs on disk)
    _wire(ctx, c)


def _wire(ctx: UIContext, c: dict) -> None:
    from gradio.context import Context

    private = {"api_visibility": "private"}
    picked = [c["run"], c["checkpoint"]]
    describe_io = {"fn": partial(describe, ctx), "inputs": [ctx.lang, *picked, c["kind"], c["gguf"]],
                   "outputs": [c["name"], c["note"], c["base"]], **private}
    show = {"fn": partial(poll, ctx), "inputs": [ctx.lang, c["job"]], "outputs": [c["report"], c["download"]],
            **private}
    listing = {"fn": partial(last_jobs, ctx), "inputs": c["job"], "outputs": [c["jobs"], c["job"]], **private}
    c["refresh"].click(partial(refresh_runs, ctx), picked, picked, **private).then(**describe_io)
    c["run"].input(partial(pick_run, ctx), c["run"], picked, **private).then(**describe_io)
    c["checkpoint"].input(**describe_io)
    c["kind"].input(**describe_io)
    c["gguf"].input(**describe_io)
    form = [ctx.lang, *picked, c["kind"], c["name"], c["shard"], c["dtype"], c["overwrite"], c["zip"], c["base"],
            c["gguf"], c["gguf_lora"]]
    c["start"].click(partial(start_job, ctx), form, [c["status"], c["job"]], **private).then(**listing).then(**show)
    c["jobs"].input(partial(job_file, ctx), c["jobs"], c["job"], **private).then(**show)
    ctx.timers.poll(POLL_EVERY_S, show["fn"], show["inputs"], show["outputs"])
    seen = gr.State(None)  # the checkpoints (and default) the last look found
    ctx.timers.poll(POLL_EVERY_S, partial(refresh_checkpoints, ctx), [*picked, seen], [c["checkpoint"], seen])
    shared_run = ctx.shared.get("run_id")
    first = [shared_run, c["checkpoint"]] if shared_run is not None else picked
    Context.root_block.load(partial(refresh_runs, ctx), first, picked, **private).then(**describe_io)
    for trigger in (Context.root_block.load, ctx.lang.change):
        trigger(partial(gguf_tools_note, ctx), ctx.lang, c["gguf_tools"], **private)
    if shared_run is not None:  # a run opened from elsewhere (the Runs tab's sweep table) is the one exported
        shared_run.change(partial(pick_run, ctx), [shared_run, picked[0]], picked, **private).then(**describe_io)
    # A refreshed page (or a restarted app) shows the last exports again, read from disk.
    Context.root_block.load(**listing).then(**show)


def last_jobs(ctx: UIContext, current: str | None = None):
    """(recent-exports dropdown update, progress file shown): `current` if it is still on disk, else the newest."""

    files = recent_exports(ctx.workspace)
    names = [f.stem for f in files]
    chosen = next((f for f in files if current and f == Path(current)), files[0] if files else None)
    return gr.update(choices=names, value=chosen.stem if chosen else None), str(chosen) if chosen else None


def job_file(ctx: UIContext, name: str | None) -> str | None:
    """The progress file of the export `name` picked from the list (only names the list offered)."""

    return next((str(f) for f in recent_exports(ctx.workspace) if f.stem == name), None)


def _checkpoints(runs_dir: Path, run_id: str | None) -> list[str]:
    """Complete checkpoints of a run (the base model is not an export)."""

    if not run_id or not (runs_dir / run_id).is_dir():
        return []
    return [c for c in checkpoint_choices(runs_dir / run_id) if c != "base"]


def _config(run_dir: Path) -> dict:
    return run_config(run_dir)


def _report_view(ctx: UIContext, lang: str, progress_file: Path):
    """(report HTML, download button update) for the export behind `progress_file`."""

    state = read_progress(progress_file)
    if state.get("state") == FAILED:
        text = ctx.msg(lang, "export.failed", error=localize(stage_of(state, "error"), lang))
        return f'<div id="export-failed">❌ {html.escape(text)}</div>', gr.update(visible=False)
    if state.get("state") != COMPLETED:
        text = ctx.msg(lang, "export.running", stage=localize(stage_of(state), lang) or "…")
        return f'<div id="export-running">⏳ {html.escape(text)}</div>', gr.skip()
    result = state.get("result") or {}
    parts = [f'<div id="export-done">✅ {html.escape(ctx.msg(lang, "export.done", path=result.get("out", "")))}</div>',
             f"<p>{html.escape(result.get('message', ''))}</p>"]
    parts += [f"<p>⚠️ {html.escape(n)}</p>" for n in result.get("notes", [])]
    verification = result.get("verification")
    if verification:
        key = {"passed": "export.verified", "ties": "export.verified_ties"}.get(
            _verdict(verification), "export.not_verified")
        parts.append(f'<p id="export-verification">{html.escape(ctx.msg(lang, key, summary=verification["summary"]))}</p>')
        parts.append(_verification_table(ctx, lang, verification["rows"]))
    if result.get("gguf"):
        parts.append(_gguf_view(ctx, lang, result["gguf"]))
    zip_path = result.get("zip")
    button = gr.update(value=zip_path, visible=True) if zip_path and Path(zip_path).is_file() else gr.update(visible=False)
    return "\n".join(parts), button


def _verdict(verification: dict) -> str:
    """passed | ties | failed (reports written before the verdict existed: from `passed`)."""
    return verification.get("verdict") or ("passed" if verification.get("passed") else "failed")


def _outcome(row: dict) -> str:
    return row.get("outcome") or ("equal" if row.get("equal") else "tie" if row.get("rounding_tie") else "differ")


def _verification_table(ctx: UIContext, lang: str, rows: list[dict]) -> str:
    head = _head(ctx, lang, "export.col", VERIFICATION_COLUMNS)
    body = "".join(
        f"<tr><td>{html.escape(r['prompt'])}</td><td>{html.escape(r['expected'])}</td>"
        f"<td>{html.escape(r['exported'])}</td><td>{html.escape(ctx.msg(lang, 'export.outcome_' + _outcome(r)))}</td>"
        f"</tr>" for r in rows)
    return f'<table class="export-verification">{head}{body}</table>'


def _head(ctx: UIContext, lang: str, prefix: str, columns) -> str:
    return "<tr>" + "".join(f"<th>{html.escape(ctx.msg(lang, f'{prefix}.{c}'))}</th>" for c in columns) + "</tr>"


def _gguf_sizes(ctx: UIContext, lang: str, checkpoint: Path, levels) -> str:
    """The size of each GGUF file asked for, or why it cannot be told (that sentence is the refusal to come)."""

    try:
        sizes = size_preview(checkpoint, ctx.workspace, list(levels))
    except ExportError as error:
        return ctx.msg(lang, "export.msg_error", error=localize(error, lang))
    return ctx.msg(lang, "export.gguf_sizes", sizes=", ".join(f"{k} ≈ {v / 1e6:,.0f} MB" for k, v in sizes.items()))


def _gguf_view(ctx: UIContext, lang: str, gguf: dict) -> str:
    """The GGUF files with what llama.cpp made of each: answers against the adapter's, KL and top-1 against f16."""

    summary = localize(Message.from_dict(gguf["checks"]["summary"]), lang)
    key = "export.gguf_passed" if gguf.get("passed") else "export.gguf_failed"
    head = _head(ctx, lang, "export.gguf_col", GGUF_COLUMNS)
    rows = []
    for level, info in gguf["files"].items():
        check = gguf["checks"]["levels"].get(level, {})
        kl, top1 = check.get("mean_kl"), check.get("top1_agreement")
        mark = "❌ " if check.get("passed") is False else ""  # a level that failed its check, flagged in its row
        rows.append(f"<tr><td>{mark}{html.escape(info['file'])}</td><td>{info['bytes'] / 1e6:,.1f}</td>"
                    f"<td>{check.get('equal', 0)}/{check.get('total', 0)}</td>"
                    f"<td>{check.get('agree_first_8', 0)}/{check.get('total', 0)}</td>"
                    f"<td>{'' if kl is None else f'{kl:.4g}'}</td><td>{'' if top1 is None else f'{top1:.1%}'}</td></tr>")
    note = localize(Message.from_dict(gguf["template_note"]), lang) if gguf.get("template_note") else ""
    verdicts = [localize(Message.from_dict(f), lang) for c in gguf["checks"]["levels"].values() for f in c.get("failures", [])]
    if gguf["checks"].get("levels_summary"):  # each level's verdict and the Modelfile's level
        verdicts.append(localize(Message.from_dict(gguf["checks"]["levels_summary"]), lang))
    return (f'<p id="export-gguf-check">{html.escape(ctx.msg(lang, key, summary=summary))}</p>'
            f'<table class="export-gguf">{head}{"".join(rows)}</table>'
            + "".join(f'<p class="export-gguf-verdict">{"✅" if gguf.get("passed") else "⚠️"} {html.escape(v)}</p>'
                      for v in verdicts)
            + (f"<p>⚠️ {html.escape(note)}</p>" if note else "")
            + f"<p>{html.escape(ctx.msg(lang, 'export.gguf_ollama'))} <code>{html.escape(gguf['ollama'])}</code></p>")
