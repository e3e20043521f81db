"""Export a checkpoint: the adapter as it is (+ a zip), or a merged model.

Merged: the base model is reloaded unquantised (also after QLoRA: merging
LoRA into a 4- or 8-bit base gives a wrong model, DESIGN section 8), the
adapter is merged in (`merge_and_unload`), and the result is saved as
sharded safetensors with the tokenizer (chat template included), the
generation config and a model card. Before success is declared, the merged
model is reloaded from disk and its greedy answers to a few prompts are
compared with the adapter's (the unmerged PeftModel on the same base).

Weights dtype (`--dtype auto`): the base model's stored dtype when that is
bf16 or fp16; for a base stored in fp32, bf16 (or fp16) on a GPU and fp32 on
the CPU, where fp32 is what training used and keeps the answers the adapter
gave. Ask for bf16 / fp16 explicitly to halve the size of an fp32 base.

Everything is written into a hidden staging folder next to the output and
renamed into place at the end, so a failed export leaves no half model; an
existing output is replaced only with `overwrite`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

from backend.background import COMPLETED, FAILED, is_running, launch, write_progress
from backend.export_files import (
    ExportError,
    base_model_for,
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
from backend.model_card import build_model_card
from backend.workspace import Workspace

DEFAULT_SHARD_SIZE = "2GB"
VERIFY_PROMPTS = 3
VERIFY_NEW_TOKENS = 32
# A swap of two next-token logits closer than this share of the top logit is 16-bit
# rounding (bf16 keeps 8 bits of mantissa: ~0.4% per weight, compounding over layers).
NEAR_TIE = 0.02
REPORT_FILE = "export_report.json"
EXPORT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
FALLBACK_PROMPTS = ("Hello! Who are you?", "What is the capital of France?", "用一句话介绍你自己。")
QLORA_NOTE = ("QLoRA: the adapter was trained on a 4/8-bit base. Merging into a quantised base gives a wrong "
              "model, so the base was reloaded unquantised ({dtype}) and the adapter merged into that.")


def export_checkpoint(checkpoint: Path, out: Path, *, merge: bool = False, shard_size: str = DEFAULT_SHARD_SIZE,
                      dtype: str = "auto", overwrite: bool = False, make_zip: bool = True, base: str | None = None,
                      workspace: Workspace | None = None, progress: Path | None = None) -> dict:
    """Export one checkpoint folder; returns the report (also written to out/export_report.json)."""
    checkpoint, out = Path(checkpoint).resolve(), Path(out).resolve()
    if not checkpoint.is_dir():
        raise ExportError(f"Checkpoint folder {checkpoint} does not exist; pick a checkpoint-<step> or final folder.")
    kind = checkpoint_kind(checkpoint)
    run_dir = find_run_dir(checkpoint)
    workspace = workspace or (Workspace.for_run_dir(run_dir) if run_dir else None)
    max_shard = parse_size(shard_size)
    prepare_output(out, overwrite)
    if kind == "full":
        report = _export_full(checkpoint, out, run_dir, workspace, max_shard, progress)
    elif merge:
        report = _export_merged(checkpoint, out, run_dir, workspace, max_shard, dtype, base, progress)
    else:
        report = _export_adapter(checkpoint, out, run_dir, workspace, base, progress)
    if make_zip:
        write_progress(progress, stage="zipping")
        report["zip"] = str(write_zip(out))
    return report


def _export_adapter(checkpoint, out, run_dir, workspace, base, progress) -> dict:
    staging = out.parent / f".{out.name}.partial"
    ensure_disk_space(out.parent, 2 * sum(f.stat().st_size for f in checkpoint.rglob("*") if f.is_file()))
    write_progress(progress, stage="copying the adapter")
    files = copy_files(checkpoint, staging)
    base_name = base_model_for(checkpoint, run_dir, workspace, base, resolve=False)
    report = {"kind": "adapter", "checkpoint": str(checkpoint), "base_model": base_name, "files": files,
              "message": "Adapter exported as saved by training (resume-only files such as optimizer.pt left out)."}
    _finish(staging, out, report, checkpoint, run_dir, workspace, base_name)
    return report


def _export_full(checkpoint, out, run_dir, workspace, max_shard, progress) -> dict:
    """A full fine-tuning checkpoint already is a whole model: nothing to merge, copy it."""
    staging = out.parent / f".{out.name}.partial"
    ensure_disk_space(out.parent, 2 * sum(f.stat().st_size for f in checkpoint.rglob("*") if f.is_file()))
    write_progress(progress, stage="copying the weights")
    files = copy_files(checkpoint, staging)
    prompts = _verification_prompts(run_dir, workspace)
    write_progress(progress, stage="verifying")
    verification = _verify(checkpoint, staging, prompts, dtype=None)
    report = {"kind": "full", "checkpoint": str(checkpoint), "files": files, "verification": verification,
              "message": "This checkpoint comes from a full fine-tuning run: there is nothing to merge, "
                         "so its weights were copied as they are."}
    base_name = str(checkpoint)
    _finish(staging, out, report, checkpoint, run_dir, workspace, base_name, require_verified=True)
    return report


def _export_merged(checkpoint, out, run_dir, workspace, max_shard, dtype, base, progress) -> dict:
    import torch
    from peft import PeftModel

    from backend.greedy import greedy_answers
    from backend.models import load_model, load_tokenizer

    base_path = base_model_for(checkpoint, run_dir, workspace, base, resolve=True)
    dtype_name = resolve_dtype(dtype, base_path)
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype_name]
    ensure_disk_space(out.parent, disk_needed_for_merge(base_path, dtype_name))
    staging = out.parent / f".{out.name}.partial"
    started = time.time()
    write_progress(progress, stage=f"loading the base model in {dtype_name}")
    tokenizer = load_tokenizer(checkpoint if (checkpoint / "tokenizer_config.json").is_file() else base_path)
    model = PeftModel.from_pretrained(load_model(base_path, dtype=torch_dtype), str(checkpoint)).eval()
    prompts = _verification_prompts(run_dir, workspace)
    write_progress(progress, stage="answering the check prompts with the adapter")
    adapter_answers = greedy_answers(model, tokenizer, prompts, max_new_tokens=VERIFY_NEW_TOKENS)
    write_progress(progress, stage="merging")
    merged = model.merge_and_unload()
    write_progress(progress, stage="saving")
    staging.mkdir(parents=True)
    merged.save_pretrained(staging, max_shard_size=max_shard)
    tokenizer.save_pretrained(staging)
    del merged, model
    write_progress(progress, stage="verifying the merged model")
    verification = _verify(None, staging, prompts, dtype=torch_dtype, expected=adapter_answers)
    notes = [QLORA_NOTE.format(dtype=dtype_name)] if is_qlora(run_dir, checkpoint) else []
    report = {"kind": "merged", "checkpoint": str(checkpoint), "base_model": base_path, "dtype": dtype_name,
              "max_shard_size": max_shard, "verification": verification, "notes": notes,
              "files": sorted(p.name for p in staging.iterdir()), "seconds": round(time.time() - started, 1),
              "message": "LoRA merged into the base model and saved as safetensors."}
    _finish(staging, out, report, checkpoint, run_dir, workspace, base_path, require_verified=True)
    return report


def _verification_prompts(run_dir, workspace) -> list[list[dict]]:
    """A few prompts from the run's held-out split (else its data, else fixed ones)."""
    from backend.greedy import prompt_and_reference

    rows = []
    if run_dir is not None:
        try:
            from backend.evaluate import held_out_rows

            rows = held_out_rows(run_dir, workspace)
        except Exception:  # noqa: BLE001 - any data problem: the fixed prompts still verify the merge
            rows = []
    prompts = [prompt_and_reference(r["messages"])[0] for r in rows[:VERIFY_PROMPTS]]
    prompts = [p for p in prompts if p]
    return prompts or [[{"role": "user", "content": text}] for text in FALLBACK_PROMPTS]


def _verify(reference_folder, folder, prompts, dtype, expected=None) -> dict:
    """Reload `folder` as a plain model and compare its greedy answers with `expected`
    (or with those of `reference_folder`).

    In 16 bits, merging rounds W + BA once where the adapter path rounds W and BA
    apart, so two near-equal next-token logits can swap. An answer that differs
    only from a position where the exported model scores the checkpoint's token
    within NEAR_TIE x |top logit| of its own choice counts as a rounding tie
    (reported apart); fp32 exports must match exactly."""
    from backend.greedy import greedy_answers
    from backend.models import load_model, load_tokenizer

    tokenizer = load_tokenizer(folder)
    if expected is None:
        expected = greedy_answers(load_model(reference_folder, dtype=dtype).eval(), tokenizer, prompts,
                                  max_new_tokens=VERIFY_NEW_TOKENS)
    model = load_model(folder, dtype=dtype).eval()
    answers = greedy_answers(model, tokenizer, prompts, max_new_tokens=VERIFY_NEW_TOKENS)
    sixteen_bit = str(model.dtype) in ("torch.bfloat16", "torch.float16")
    rows = []
    for prompt, want, got in zip(prompts, expected, answers):
        gap = None if want == got or not sixteen_bit else _divergence_gap(model, tokenizer, prompt, want, got)
        tie = gap is not None and gap[0] < NEAR_TIE * max(1.0, abs(gap[1]))
        rows.append({"prompt": prompt[-1]["content"], "expected": want, "exported": got, "equal": want == got,
                     "rounding_tie": tie, "logit_gap": gap and gap[0], "top_logit": gap and gap[1]})
    equal = sum(r["equal"] for r in rows)
    ties = sum(r["rounding_tie"] for r in rows)
    summary = f"{equal} of {len(rows)} greedy answers of the exported model equal the checkpoint's"
    summary += f"; {ties} more differ only after a 16-bit rounding tie (logit gap < {NEAR_TIE:.0%} of the top logit)." if ties else "."
    return {"passed": equal + ties == len(rows), "equal": equal, "rounding_ties": ties, "total": len(rows),
            "rows": rows, "summary": summary}


def _divergence_gap(model, tokenizer, prompt, want: str, got: str) -> tuple[float, float] | None:
    """(logit gap, top logit) in the exported model between its own token and the
    checkpoint's at the first token where the two answers part."""
    import torch

    from backend.data.encode import render

    context = tokenizer(render(tokenizer, prompt, add_generation_prompt=True), add_special_tokens=False)["input_ids"]
    want_ids = tokenizer(want, add_special_tokens=False)["input_ids"]
    got_ids = tokenizer(got, add_special_tokens=False)["input_ids"]
    k = next((i for i, (a, b) in enumerate(zip(want_ids, got_ids)) if a != b), min(len(want_ids), len(got_ids)))
    if k >= len(want_ids):
        return None  # the checkpoint stopped where the export went on: not a tie to judge here
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([context + got_ids[:k]])).logits[0, -1].float()
    return float(logits.max() - logits[want_ids[k]]), float(logits.max())


def _finish(staging, out, report, checkpoint, run_dir, workspace, base_name, require_verified=False) -> None:
    verification = report.get("verification")
    card_info = {"dtype": report.get("dtype"), "verification": verification, "note": " ".join(report.get("notes", []))}
    title = out.name
    card = build_model_card(title=title, base_model=base_name, kind=report["kind"], checkpoint=checkpoint,
                            run_dir=run_dir, workspace=workspace, export_info=card_info)
    (staging / "README.md").write_text(card, encoding="utf-8")
    report["out"] = str(out)
    (staging / REPORT_FILE).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if require_verified and verification and not verification["passed"]:
        failed = out.parent / f"{out.name}.failed-verification"
        shutil.rmtree(failed, ignore_errors=True)
        staging.rename(failed)
        raise ExportError(f"Verification failed: {verification['summary']} The export was kept for inspection "
                          f"in {failed}, not in {out}; report this with {failed / REPORT_FILE}.")
    publish(staging, out)


# ---------------------------------------------------------------- background job (the Export tab)

def exports_dir(workspace: Workspace) -> Path:
    return workspace.root / "exports"


def job_progress_path(workspace: Workspace, name: str) -> Path:
    return exports_dir(workspace) / ".jobs" / f"{name}.json"


def start_export(workspace: Workspace, checkpoint: Path, name: str, *, merge: bool, shard_size: str = DEFAULT_SHARD_SIZE,
                 dtype: str = "auto", overwrite: bool = False, make_zip: bool = True) -> Path:
    """Launch `python -m backend.export` detached into workspace/exports/<name>; returns the progress file."""
    if not EXPORT_NAME.match(name or ""):
        raise ExportError(f"Export name {name!r} is not usable: use letters, digits, '.', '_' and '-' only "
                          f"(it becomes the folder workspace/exports/<name>).")
    out = exports_dir(workspace) / name
    prepare_output(out, overwrite)  # refuse an existing folder now, before a process starts
    parse_size(shard_size)
    progress = job_progress_path(workspace, name)
    if is_running(progress):
        raise ExportError(f"An export into {out} is already running; wait for it to finish.")
    progress.unlink(missing_ok=True)
    args = ["--checkpoint", str(checkpoint), "--out", str(out), "--shard-size", shard_size, "--dtype", dtype]
    args += ["--merge"] * merge + ["--overwrite"] * overwrite + ["--no-zip"] * (not make_zip)
    launch("backend.export", args, progress.with_suffix(".log"), progress)
    return progress


# ---------------------------------------------------------------- command line

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m backend.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="checkpoint-<step> or final folder of a run")
    parser.add_argument("--out", required=True, help="output folder (must not exist unless --overwrite)")
    parser.add_argument("--merge", action="store_true", help="merge the LoRA adapter into the base model")
    parser.add_argument("--shard-size", default=DEFAULT_SHARD_SIZE, help="largest safetensors shard, e.g. 2GB, 500MB")
    parser.add_argument("--dtype", default="auto", choices=("auto", "bf16", "fp16", "fp32"),
                        help="dtype of the merged weights (auto: see the module docs)")
    parser.add_argument("--base", help="base model folder (default: the run's model_name_or_path)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.add_argument("--no-zip", action="store_true", help="do not write <out>.zip")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--progress", type=Path, help=argparse.SUPPRESS)  # set by the UI's background launcher
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = export_checkpoint(Path(args.checkpoint), Path(args.out), merge=args.merge,
                                   shard_size=args.shard_size, dtype=args.dtype, overwrite=args.overwrite,
                                   make_zip=not args.no_zip, base=args.base, progress=args.progress)
    except ExportError as error:
        write_progress(args.progress, state=FAILED, error=str(error))
        print(f"export failed: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - model loading etc.: the message goes to the UI too
        write_progress(args.progress, state=FAILED, error=f"{type(error).__name__}: {error}")
        raise
    write_progress(args.progress, state=COMPLETED, stage="done", result=report)
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else _summary(report))
    return 0


def _summary(report: dict) -> str:
    lines = [report["message"], f"Written to {report['out']}"]
    if report.get("zip"):
        lines.append(f"Zip: {report['zip']}")
    if report.get("verification"):
        lines.append("Verification: " + report["verification"]["summary"])
    lines.extend(report.get("notes", []))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
