"""Export a checkpoint: the adapter as it is (+ a zip), or a merged model.

Merged: the base model is reloaded unquantised (also after QLoRA: merging
LoRA into a 4- or 8-bit base gives a wrong model, docs/LIBRARY_TRAPS.md), the
adapter is merged in (`merge_and_unload`), and the result is saved as
sharded safetensors with the tokenizer (chat template included), the
generation config and a model card. Before success is declared, the merged
model is reloaded from disk and its greedy answers to a few prompts are
compared with the adapter's (the unmerged PeftModel on the same base):
equal, 16-bit rounding tie or differ, see backend/export/verify.py.

Weights dtype (`--dtype auto`): the base model's stored dtype when that is
bf16 or fp16; for a base stored in fp32, bf16 (or fp16) on a GPU and fp32 on
the CPU, where fp32 is what training used and keeps the answers the adapter
gave. Ask for bf16 / fp16 explicitly to halve the size of an fp32 base.

Everything is written into a hidden staging folder next to the output and
renamed into place at the end, so a failed export leaves no half model; an
existing output is replaced only with `overwrite`.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from backend.data.general_prompts import HELD_OUT_QUESTIONS
from backend.evaluation.scoring import held_out_rows
from backend.export.gguf_export import GGUF_NEW_TOKENS, GGUF_PROMPTS, GGUFRequest, export_gguf, export_lora_gguf
from backend.export.llama_cpp_tools import DEFAULT_LEVEL, check_tools, parse_levels
from backend.export.model_card import build_model_card, gguf_section, run_config
from backend.export.outputs import (
    ExportError,
    base_model_for,
    check_base_matches,
    checkpoint_kind,
    copy_files,
    disk_needed_for_merge,
    ensure_disk_space,
    find_run_dir,
    is_qlora,
    parse_size,
    prepare_output,
    publish,
    resolve_dtype,
    write_zip,
)
from backend.export.verify import FAILED as VERIFY_FAILED
from backend.export.verify import VERIFY_NEW_TOKENS, verify_export
from backend.messages import message_of, msg
from backend.models.chat_templates import resize_embeddings, set_stop_ids
from backend.models.greedy import greedy_answers, greedy_token_ids, prompt_and_reference
from backend.models.loading import load_model, load_tokenizer
from backend.runs.jobs import is_running, launch_job, recent_jobs, write_progress
from backend.runs.workspace import Workspace
from backend.storage.safe_names import UnsafeName, checked_name, path_inside

DEFAULT_SHARD_SIZE = "2GB"
VERIFY_PROMPTS = 3
REPORT_FILE = "export_report.json"
FALLBACK_PROMPTS = ("Hello! Who are you?", "What is the capital of France?", "用一句话介绍你自己。")
QLORA_NOTE = ("QLoRA: the adapter was trained on a 4/8-bit base. Merging into a quantised base gives a wrong "
              "model, so the base was reloaded unquantised ({dtype}) and the adapter merged into that.")


def export_checkpoint(checkpoint: Path, out: Path, *, merge: bool = False, shard_size: str = DEFAULT_SHARD_SIZE,
                      dtype: str = "auto", overwrite: bool = False, make_zip: bool = True, base: str | None = None,
                      workspace: Workspace | None = None, progress: Path | None = None,
                      gguf: list[str] | None = None, gguf_lora: str | None = None) -> dict:
    """Export one checkpoint folder; returns the report (also written to out/export_report.json).

    `gguf`: levels (q4_k_m, q8_0, f16, ...) written from the merged model into out/gguf/ and checked
    by running them in llama.cpp (backend/export/gguf_export.py); `gguf_lora`: the adapter alone too."""
    checkpoint, out = Path(checkpoint).resolve(), Path(out).resolve()
    if not checkpoint.is_dir():
        raise ExportError(msg("export.no_checkpoint", path=checkpoint))
    kind = checkpoint_kind(checkpoint)
    run_dir = find_run_dir(checkpoint)
    workspace = workspace or (Workspace.for_run_dir(run_dir) if run_dir else None)
    max_shard = parse_size(shard_size)
    prepare_output(out, overwrite)
    request = _gguf_request(gguf, gguf_lora, kind, run_dir, workspace)  # refusals before any heavy step
    if kind == "full":
        report = _export_full(checkpoint, out, run_dir, workspace, max_shard, progress, request)
    elif merge or request:
        report = _export_merged(checkpoint, out, run_dir, workspace, max_shard, dtype, base, progress, request)
    else:
        report = _export_adapter(checkpoint, out, run_dir, workspace, base, progress)
    if request:
        _write_gguf(checkpoint, out, report, request, gguf_lora, progress)
    if make_zip:
        write_progress(progress, stage=msg("export.stage.zipping"))
        report["zip"] = str(write_zip(out))
    return report


def _export_adapter(checkpoint, out, run_dir, workspace, base, progress) -> dict:
    staging = out.parent / f".{out.name}.partial"
    ensure_disk_space(out.parent, 2 * sum(f.stat().st_size for f in checkpoint.rglob("*") if f.is_file()))
    write_progress(progress, stage=msg("export.stage.copy_adapter"))
    files = copy_files(checkpoint, staging)
    base_model = base_model_for(checkpoint, run_dir, workspace, base, resolve=False)
    report = {"kind": "adapter", "checkpoint": str(checkpoint), "base_model": base_model.hub_id or base_model.name,
              "files": files,
              "message": "Adapter exported as saved by training (resume-only files such as optimizer.pt left out)."}
    _finish(staging, out, report, checkpoint, run_dir, workspace, base_model)
    return report


def _export_full(checkpoint, out, run_dir, workspace, max_shard, progress, request=None) -> dict:
    """A full fine-tuning checkpoint already is a whole model: nothing to merge, copy it."""
    staging = out.parent / f".{out.name}.partial"
    ensure_disk_space(out.parent, 2 * sum(f.stat().st_size for f in checkpoint.rglob("*") if f.is_file()))
    write_progress(progress, stage=msg("export.stage.copy_weights"))
    files = copy_files(checkpoint, staging)
    prompts = _verification_prompts(run_dir, workspace)
    write_progress(progress, stage=msg("export.stage.verifying"))
    verification = verify_export(checkpoint, staging, prompts, dtype=None)
    if request:
        request.reference_ids = greedy_token_ids(load_model(checkpoint).eval(), load_tokenizer(checkpoint),
                                                 request.prompts, max_new_tokens=GGUF_NEW_TOKENS)
    report = {"kind": "full", "checkpoint": str(checkpoint), "files": files, "verification": verification,
              "message": "This checkpoint comes from a full fine-tuning run: there is nothing to merge, "
                         "so its weights were copied as they are."}
    base_model = base_model_for(checkpoint, run_dir, workspace, None, resolve=False) if run_dir else None
    _finish(staging, out, report, checkpoint, run_dir, workspace, base_model, require_verified=True)
    return report


def _export_merged(checkpoint, out, run_dir, workspace, max_shard, dtype, base, progress, request=None) -> dict:
    import torch
    from peft import PeftModel

    base_model = base_model_for(checkpoint, run_dir, workspace, base, resolve=True)  # converts a GGUF base
    check_base_matches(checkpoint, run_dir, workspace, base)
    base_path = base_model.path
    dtype_name = resolve_dtype(dtype, base_path)
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype_name]
    ensure_disk_space(out.parent, disk_needed_for_merge(base_path, dtype_name))
    staging = out.parent / f".{out.name}.partial"
    started = time.time()
    write_progress(progress, stage=msg("export.stage.load_base", dtype=dtype_name))
    tokenizer = load_tokenizer(checkpoint if (checkpoint / "tokenizer_config.json").is_file() else base_path)
    base_weights = load_model(base_path, dtype=torch_dtype)
    # The checkpoint's tokenizer holds the run's template (and any tokens it added): the base grows to
    # match before the adapter attaches, and the merged model stops on the template's EOS too.
    resize_embeddings(base_weights, len(tokenizer))
    set_stop_ids(base_weights, tokenizer)
    model = PeftModel.from_pretrained(base_weights, str(checkpoint)).eval()
    prompts = _verification_prompts(run_dir, workspace)
    write_progress(progress, stage=msg("export.stage.check_prompts"))
    adapter_answers = greedy_answers(model, tokenizer, prompts, max_new_tokens=VERIFY_NEW_TOKENS)
    if request:  # the reference the GGUF files are checked against: the adapter itself
        request.reference_ids = greedy_token_ids(model, tokenizer, request.prompts, max_new_tokens=GGUF_NEW_TOKENS)
    write_progress(progress, stage=msg("export.stage.merging"))
    merged = model.merge_and_unload()
    write_progress(progress, stage=msg("export.stage.saving"))
    staging.mkdir(parents=True)
    merged.save_pretrained(staging, max_shard_size=max_shard)
    tokenizer.save_pretrained(staging)
    del merged, model
    write_progress(progress, stage=msg("export.stage.verify_merged"))
    verification = verify_export(None, staging, prompts, dtype=torch_dtype, expected=adapter_answers)
    notes = [QLORA_NOTE.format(dtype=dtype_name)] if is_qlora(run_dir, checkpoint) else []
    report = {"kind": "merged", "checkpoint": str(checkpoint), "base_model": base_model.hub_id or base_model.name,
              "base_folder": base_path, "dtype": dtype_name,
              "max_shard_size": max_shard, "verification": verification, "notes": notes,
              "files": sorted(p.name for p in staging.iterdir()), "seconds": round(time.time() - started, 1),
              "message": "LoRA merged into the base model and saved as safetensors."}
    _finish(staging, out, report, checkpoint, run_dir, workspace, base_model, require_verified=True)
    return report


def _verification_prompts(run_dir, workspace, count: int = VERIFY_PROMPTS) -> list[list[dict]]:
    """A few prompts from the run's held-out split (else its data, else fixed ones)."""
    return [prompt for prompt, _ in _held_out_pairs(run_dir, workspace, count)]


def _held_out_pairs(run_dir, workspace, count: int, fill: bool = False) -> list[tuple[list[dict], str]]:
    """(prompt messages, reference answer) of the first held-out rows; fixed prompts when there are none.
    `fill`: up to `count` with the general held-out questions (never trained on) when the split is smaller."""

    rows = []
    if run_dir is not None:
        try:
            rows = held_out_rows(run_dir, workspace)
        except Exception:  # noqa: BLE001 - any data problem: the fixed prompts still verify the merge
            rows = []
    pairs = [prompt_and_reference(r["messages"]) for r in rows[:count]]
    pairs = [(prompt, answer) for prompt, answer in pairs if prompt]
    if fill and len(pairs) < count:
        pairs += [([{"role": "user", "content": q}], "") for q, _ in HELD_OUT_QUESTIONS[:count - len(pairs)]]
    return pairs or [([{"role": "user", "content": text}], "") for text in FALLBACK_PROMPTS]


def _gguf_request(levels, lora, kind, run_dir, workspace):
    """The GGUF part of an export, checked before anything heavy runs (tools present, levels known)."""
    if not levels and not lora:
        return None

    parsed = parse_levels(levels or [DEFAULT_LEVEL])
    check_tools()
    pairs = _held_out_pairs(run_dir, workspace, GGUF_PROMPTS, fill=True)
    return GGUFRequest(parsed, prompts=[prompt for prompt, _ in pairs], answers=[answer for _, answer in pairs],
                       cutoff_len=run_config(run_dir).get("cutoff_len"))


def _write_gguf(checkpoint, out, report, request, lora, progress) -> dict:
    """GGUF files beside the published merged model; a refusal names the merged folder, which stays."""

    try:
        gguf = export_gguf(out, out.name, request, progress)
        if lora:
            if report["kind"] == "full":
                raise ExportError(msg("gguf_export.lora_of_full"))
            gguf["lora"] = export_lora_gguf(checkpoint, report["base_folder"], out / "gguf", out.name, lora)
    except ExportError as error:
        raise ExportError(msg("gguf_export.failed_merged_kept", error=message_of(error) or str(error), out=out)) from None
    report["gguf"] = gguf  # the report on disk holds the GGUF part too
    (out / REPORT_FILE).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    with open(out / "README.md", "a", encoding="utf-8") as card:
        card.write("\n" + gguf_section(gguf))
    return gguf


def _finish(staging, out, report, checkpoint, run_dir, workspace, base_model, require_verified=False) -> None:
    verification = report.get("verification")
    card_info = {"dtype": report.get("dtype"), "verification": verification, "note": " ".join(report.get("notes", []))}
    title = out.name
    card = build_model_card(title=title, base_model=base_model, kind=report["kind"], checkpoint=checkpoint,
                            run_dir=run_dir, workspace=workspace, export_info=card_info)
    (staging / "README.md").write_text(card, encoding="utf-8")
    report["out"] = str(out)
    (staging / REPORT_FILE).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    # Ties are rounding, explained in the report: the export is kept. Any other difference holds it back.
    if require_verified and verification and verification["verdict"] == VERIFY_FAILED:
        failed = out.parent / f"{out.name}.failed-verification"
        shutil.rmtree(failed, ignore_errors=True)
        staging.rename(failed)
        raise ExportError(msg("export.verify_failed", summary=verification["summary"], failed=failed, out=out,
                              report=failed / REPORT_FILE))
    publish(staging, out)


# ---------------------------------------------------------------- background job (the Export tab)

def exports_dir(workspace: Workspace) -> Path:
    return workspace.root / "exports"


def export_folder(workspace: Workspace, name: str) -> Path:
    """workspace/exports/<name>, for a name the user typed (refused unless it is a plain folder name)."""
    try:
        return path_inside(exports_dir(workspace), checked_name(name, msg("name.export"), 100))
    except UnsafeName as error:
        raise ExportError(msg("export.bad_name", error=message_of(error) or str(error))) from None


def job_progress_path(workspace: Workspace, name: str) -> Path:
    return exports_dir(workspace) / ".jobs" / f"{name}.json"


def recent_exports(workspace: Workspace, limit: int = 10) -> list[Path]:
    """Progress files of the last export jobs, newest first (they outlive the page that started them)."""

    return recent_jobs(exports_dir(workspace) / ".jobs", limit)


def start_export(workspace: Workspace, checkpoint: Path, name: str, *, merge: bool, shard_size: str = DEFAULT_SHARD_SIZE,
                 dtype: str = "auto", overwrite: bool = False, make_zip: bool = True, base: str | None = None,
                 gguf: list[str] | None = None, gguf_lora: str | None = None) -> Path:
    """Launch `python -m backend.export` detached into workspace/exports/<name>; returns the progress file.

    `base`: the base model's folder or hub id when it is not where the run found it (empty: the run's).
    `gguf` / `gguf_lora`: as export_checkpoint's, checked here before a process starts."""
    out = export_folder(workspace, name)
    prepare_output(out, overwrite)  # refuse an existing folder now, before a process starts
    parse_size(shard_size)
    if merge or gguf or gguf_lora:  # a base of another architecture is refused before a process starts
        check_base_matches(checkpoint, find_run_dir(checkpoint), workspace, base)
    if gguf or gguf_lora:
        gguf = [level.name for level in parse_levels(gguf or ["q4_k_m"])]
        check_tools()
    progress = job_progress_path(workspace, name)
    if is_running(progress):
        raise ExportError(msg("export.running", out=out))
    progress.unlink(missing_ok=True)
    args = ["--checkpoint", str(checkpoint), "--out", str(out), "--shard-size", shard_size, "--dtype", dtype]
    args += ["--merge"] * merge + ["--overwrite"] * overwrite + ["--no-zip"] * (not make_zip)
    args += ["--base", base.strip()] if base and base.strip() else []
    args += ["--gguf", *gguf] if gguf else []
    args += ["--gguf-lora", gguf_lora] if gguf_lora else []
    launch_job("backend.export", args, progress.with_suffix(".log"), progress)
    return progress
