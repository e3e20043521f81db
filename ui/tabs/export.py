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

POLL_EVERY_S = 2.0
SHARD_SIZES = ("500MB", "1GB", "2GB", "5GB", "10GB")
GGUF_LEVELS = ("q4_k_m", "q5_k_m", "q6_k", "q8_0", "f16", "bf16")
NO_LORA = "none"

TEXT: dict[str, dict[str, str]] = {
    "export.run": {"en": "Run", "zh": "训练运行"},
    "export.checkpoint": {"en": "Checkpoint", "zh": "检查点"},
    "export.refresh": {"en": "Refresh", "zh": "刷新"},
    "export.kind": {"en": "What to export", "zh": "导出内容"},
    "export.kind_adapter": {"en": "Adapter only (small; needs the base model to run)",
                            "zh": "仅适配器（体积小；运行时需要基座模型）"},
    "export.kind_merged": {"en": "Merged model (base + LoRA, runs anywhere)", "zh": "合并后的模型（基座 + LoRA，可独立运行）"},
    "export.name": {"en": "Name (folder under workspace/exports)", "zh": "名称（workspace/exports 下的文件夹）"},
    "export.base": {"en": "Base model to merge into", "zh": "合并所用的基座模型"},
    "export.base_info": {
        "en": "As the run loaded it, a model found on this machine (Settings → Model folders adds places), or type "
              "a folder or a hub id. Merging needs transformers weights: a GGUF model (Ollama, LM Studio) is listed "
              "only once a run or Chat has converted it into this workspace.",
        "zh": "训练时加载的位置、本机找到的模型（可在“设置 → 模型文件夹”中添加位置），或输入文件夹或 Hub ID。合并需要 transformers 权重："
              "GGUF 模型（Ollama、LM Studio）只有在训练或对话已将其转换到本工作区后才会列出。"},
    "export.base_run": {"en": "as the run loaded it: {name}", "zh": "训练时加载的位置：{name}"},
    "export.base_gguf_left": {"en": "{count} GGUF model(s) found on this machine are not listed: not converted into "
                                    "this workspace yet (train or chat with one first).",
                              "zh": "本机找到的 {count} 个 GGUF 模型未列出：尚未转换到本工作区（请先用它训练或对话）。"},
    "export.shard_size": {"en": "Largest safetensors shard", "zh": "safetensors 单个分片上限"},
    "export.dtype": {"en": "Weights dtype (merged)", "zh": "权重精度（合并时）"},
    "export.overwrite": {"en": "Overwrite an existing export of this name", "zh": "覆盖同名的已有导出"},
    "export.zip": {"en": "Also make a zip to download", "zh": "同时生成可下载的 zip"},
    "export.start": {"en": "Export", "zh": "导出"},
    "export.gguf": {"en": "GGUF for llama.cpp / Ollama (from the merged model; each file is checked in llama.cpp)",
                    "zh": "用于 llama.cpp / Ollama 的 GGUF（由合并后的模型生成；每个文件都会在 llama.cpp 中检查）"},
    "export.gguf_lora": {"en": "Also the adapter alone as a GGUF LoRA", "zh": "同时把适配器单独导出为 GGUF LoRA"},
    "export.gguf_sizes": {"en": "GGUF sizes: {sizes}", "zh": "GGUF 大小：{sizes}"},
    "export.gguf_passed": {"en": "GGUF check passed: {summary}", "zh": "GGUF 检查通过：{summary}"},
    "export.gguf_failed": {"en": "GGUF check FAILED (the files are kept for inspection): {summary}",
                           "zh": "GGUF 检查未通过（文件已保留以便检查）：{summary}"},
    "export.gguf_ollama": {"en": "Run it in Ollama:", "zh": "在 Ollama 中运行："},
    "export.jobs": {"en": "Recent exports (kept on disk: shown again after a page refresh or an app restart)",
                    "zh": "最近的导出（保存在磁盘上：刷新页面或重启应用后仍会显示）"},
    "export.download": {"en": "Download", "zh": "下载"},
    "export.dtype_help": {
        "en": "auto: the base model's own 16-bit dtype; a base stored in fp32 stays fp32 on the CPU (bf16 on a GPU). "
              "Choose bf16 or fp16 to halve the size.",
        "zh": "auto：使用基座模型自身的 16 位精度；以 fp32 存储的基座在 CPU 上保持 fp32（GPU 上为 bf16）。选择 bf16 或 fp16 可将体积减半。"},
    "export.note_qlora": {
        "en": "⚠️ This is a QLoRA run: its base was loaded in {bits}-bit for training. Merging LoRA into a quantised "
              "base gives a wrong model, so the export reloads the base in 16 bits (or fp32) and merges there.",
        "zh": "⚠️ 这是 QLoRA 运行：训练时基座以 {bits} 位量化加载。把 LoRA 合并进量化基座会得到错误的模型，"
              "因此导出时会以 16 位（或 fp32）重新加载基座后再合并。"},
    "export.note_full": {
        "en": "This run fine-tuned every weight: there is no adapter to merge; the export copies the weights.",
        "zh": "该运行是全参数微调：没有可合并的适配器，导出会直接复制权重。"},
    "export.msg_pick": {"en": "Pick a run and a checkpoint first.", "zh": "请先选择训练运行和检查点。"},
    "export.msg_exists": {"en": "{path} already exists. Choose another name, or tick Overwrite to replace it.",
                          "zh": "{path} 已存在。请换一个名称，或勾选“覆盖”以替换它。"},
    "export.msg_started": {"en": "Export started in the background (writing {path}).",
                           "zh": "导出已在后台开始（写入 {path}）。"},
    "export.msg_error": {"en": "Cannot export: {error}", "zh": "无法导出：{error}"},
    "export.running": {"en": "Exporting: {stage} …", "zh": "正在导出：{stage}……"},
    "export.failed": {"en": "Export failed: {error}", "zh": "导出失败：{error}"},
    "export.done": {"en": "Export finished: {path}", "zh": "导出完成：{path}"},
    "export.verified": {"en": "Verification passed: {summary}", "zh": "验证通过：{summary}"},
    "export.not_verified": {"en": "Verification FAILED: {summary}", "zh": "验证失败：{summary}"},
    "export.verified_ties": {"en": "Verification not passed (16-bit rounding ties only; the export is kept): {summary}",
                             "zh": "验证未通过（仅有 16 位舍入并列，导出已保留）：{summary}"},
    "export.outcome_equal": {"en": "✅ equal", "zh": "✅ 相同"},
    "export.outcome_tie": {"en": "≈ differs after a 16-bit rounding tie", "zh": "≈ 16 位舍入并列后不同"},
    "export.outcome_differ": {"en": "❌ differs", "zh": "❌ 不同"},
    "export.gguf_unavailable": {"en": "⚠️ GGUF levels cannot be exported on this machine: {reason}",
                                "zh": "⚠️ 本机无法导出 GGUF：{reason}"},
    # Column headers of the verification table and of the GGUF table.
    "export.col.prompt": {"en": "prompt", "zh": "提示"},
    "export.col.expected": {"en": "checkpoint (adapter)", "zh": "检查点（适配器）"},
    "export.col.exported": {"en": "exported", "zh": "导出后"},
    "export.col.outcome": {"en": "outcome", "zh": "结果"},
    "export.gguf_col.file": {"en": "file", "zh": "文件"},
    "export.gguf_col.mb": {"en": "MB", "zh": "MB"},
    "export.gguf_col.equal": {"en": "answers equal to the adapter's", "zh": "与适配器相同的回答"},
    "export.gguf_col.agree": {"en": "agree over 8 first tokens", "zh": "前 8 个 token 一致"},
    "export.gguf_col.kl": {"en": "mean KL vs f16", "zh": "相对 f16 的平均 KL"},
    "export.gguf_col.top1": {"en": "top-1 vs f16", "zh": "相对 f16 的 top-1 一致率"},
}
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
    ticker = gr.Timer(POLL_EVERY_S)
    ticker.tick(show_progress="hidden", **show)
    seen = gr.State(None)  # the checkpoints (and default) the last look found
    ticker.tick(partial(refresh_checkpoints, ctx), [*picked, seen], [c["checkpoint"], seen], show_progress="hidden",
                **private)
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
