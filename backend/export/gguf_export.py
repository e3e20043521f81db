"""GGUF files from a merged (or full) model, checked by running them in llama.cpp.

Steps, each after a disk check: llama.cpp's converter writes f16 (and bf16 /
q8_0 directly), its quantizer writes the k-quants from the f16 file; the
chat template and EOS are read back from each file; then llama.cpp answers
the run's held-out prompts greedily and the answers are compared, token by
token, with the adapter's through transformers + peft, and each level's
next-token distributions with the f16 file's (mean KL divergence and top-1
agreement, llama.cpp's own way of judging a quant); each level passes or
fails by thresholds on both (gguf_judgement.py). An Ollama Modelfile is
written beside the files, running the smallest level that passed. A failed
check is reported plainly and the files are kept; a refusal removes only
the partial file, never the merged model.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from safetensors import safe_open

from backend.export import llama_cpp_tools as tools
from backend.export.gguf_checks import compare_answers, distribution_stats, metadata_check
from backend.export.gguf_judgement import AGREE_TOKENS, judge_level, levels_summary, modelfile_level
from backend.export.modelfile import build_modelfile, match_family, modelfile_context, stop_texts
from backend.export.outputs import (
    ExportError,
    base_model_for,
    checkpoint_kind,
    count_parameters,
    ensure_disk_space,
    find_run_dir,
)
from backend.messages import msg
from backend.models.chat_templates import render, stop_token_ids
from backend.models.gguf_engine import GGUFModel
from backend.models.loading import load_tokenizer, model_context_length
from backend.runs.jobs import write_progress

GGUF_FOLDER = "gguf"
GGUF_PROMPTS = 10
GGUF_NEW_TOKENS = 32
DISK_MARGIN = 1.15
LORA_TYPES = ("f16", "q8_0")
# Bits per weight of the type llama.cpp falls back to when a k-quant's rows are not a multiple of 256
# (q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0; llama-quant.cpp), measured as written with the mixes' q6_k/q8_0 parts.
K_QUANT_FALLBACK_BITS = {"q4_k_m": 6.0, "q5_k_m": 6.5, "q6_k": 8.5}


@dataclass
class GGUFRequest:
    levels: list[tools.Level]
    prompts: list[list[dict]] = field(default_factory=list)        # generation prompts (held-out)
    answers: list[str] = field(default_factory=list)               # each prompt's reference answer, or ""
    reference_ids: list[list[int]] | None = None                   # the adapter's greedy answers, as token ids
    cutoff_len: int | None = None                                  # the run's, for the Modelfile's num_ctx


def planned_sizes(model_dir: Path, levels: list[tools.Level]) -> dict[str, int]:
    """Bytes each file will take (shown before the export starts), tensor by tensor from the
    safetensors headers: 1-D tensors stay f32, and a k-quant's rows must be a multiple of 256
    values, else llama.cpp falls back to a 32-block type (SmolLM2's 576 columns do)."""
    tensors = _tensor_shapes(model_dir)
    if not tensors:  # no safetensors headers to read: the parameter count alone
        parameters = count_parameters(str(model_dir))
        return {level.name: int(parameters * level.bits_per_weight / 8) for level in levels}
    sizes = {}
    for level in levels:
        bits = 0.0
        for name, shape in tensors:
            count = math.prod(shape)
            if len(shape) < 2:
                bits += 32 * count
                continue
            # The _m mixes keep the output (or the tied embedding that serves as it) in q6_k.
            kind = "q6_k" if level.ftype is not None and ("lm_head" in name or "embed" in name) else level.name
            if level.ftype is not None and shape[-1] % 256:
                bits += K_QUANT_FALLBACK_BITS[kind] * count
            else:
                bits += tools.LEVELS[kind].bits_per_weight * count
        sizes[level.name] = int(bits / 8)
    return sizes


def _tensor_shapes(model_dir: Path) -> list[tuple[str, tuple[int, ...]]]:
    tensors = []
    for file in sorted(Path(model_dir).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            tensors += [(key, tuple(handle.get_slice(key).get_shape())) for key in handle.keys()]  # noqa: SIM118
    return tensors


def export_gguf(model_dir: Path, name: str, request: GGUFRequest, progress: Path | None = None) -> dict:
    """Write out/gguf/<name>-<level>.gguf for each level, the Modelfile and the checks; returns the report."""

    folder = tools.check_tools()
    started = time.time()
    out_dir = model_dir / GGUF_FOLDER
    out_dir.mkdir(exist_ok=True)
    log = out_dir / "convert.log"
    tokenizer = load_tokenizer(model_dir)
    wanted = [level.name for level in request.levels]
    f16 = tools.LEVELS["f16"]
    order = [f16, *[level for level in request.levels if level is not f16]]  # f16 first: the k-quants' source
    sizes = planned_sizes(model_dir, order)
    files: dict[str, Path] = {}
    for level in order:
        target = out_dir / f"{name}-{level.name}.gguf"
        ensure_disk_space(out_dir, int(sizes[level.name] * DISK_MARGIN))
        stage = msg("gguf_export.stage.writing", level=level.name, size=_mb(sizes[level.name]))
        write_progress(progress, stage=stage)
        print(stage, file=sys.stderr, flush=True)  # the command line sees each size before its file is written
        partial = target.with_name(target.name + ".partial")
        if level.outtype:
            tools.convert_hf_to_gguf(model_dir, partial, level.outtype, log)
        else:
            tools.quantize(files["f16"], partial, level)
        partial.rename(target)
        files[level.name] = target
    stops = _stop_ids(model_dir, tokenizer)
    write_progress(progress, stage=msg("gguf_export.stage.checking"))
    metadata = {lv: metadata_check(path, tokenizer, stops) for lv, path in files.items()}
    checks = run_checks(files, tokenizer, request)
    match = match_family(tokenizer)
    modelfile = out_dir / "Modelfile"
    chosen = _write_modelfile(modelfile, files, checks, wanted, match, stop_texts(tokenizer, stops),
                              modelfile_context(model_context_length(model_dir), request.cutoff_len))
    if "f16" not in wanted:  # it was the quantizer's source and the checks' reference
        files.pop("f16").unlink()
    return {
        "folder": str(out_dir), "converter": str(folder), "llama_cpp_version": tools.LLAMA_CPP_VERSION,
        "files": {lv: {"file": p.name, "bytes": p.stat().st_size} for lv, p in files.items()},
        "planned_bytes": sizes, "metadata": metadata, "checks": checks,
        "modelfile": modelfile.name, "modelfile_level": chosen, "failed_levels": checks["failed"],
        "template_family": match.family.name if match.family else None,
        "template_note": "" if match.family else msg("gguf_export.template_not_expressed", start=match.reason).to_dict(),
        "ollama": f"ollama create {_ollama_name(name)} -f {modelfile}",
        "passed": checks["passed"] and all(m["passed"] for m in metadata.values()),
        "seconds": round(time.time() - started, 1),
    }


def _write_modelfile(path: Path, files: dict[str, Path], checks: dict, wanted: list[str], match, stops: list[str],
                     num_ctx: int) -> str | None:
    """The Modelfile over the smallest level asked for that passed (returned; None when none did, and the
    file then runs the first quant asked for under a comment saying so); the verdict goes into `checks`."""
    chosen = modelfile_level(checks["levels"], {lv: p.stat().st_size for lv, p in files.items()}, wanted)
    fallback = next((lv for lv in wanted if lv != "f16"), wanted[0])
    summary = levels_summary(checks["levels"], wanted, chosen, fallback)
    checks["levels_summary"] = summary.to_dict()
    note = None if chosen else str(summary)  # the file a user opens says it too
    path.write_text(build_modelfile(files[chosen or fallback].name, match, stops, num_ctx, note=note), encoding="utf-8")
    return chosen


def run_checks(files: dict[str, Path], tokenizer, request: GGUFRequest) -> dict:
    """llama.cpp's greedy answers against the adapter's, and each level's distributions against f16's."""

    texts = [render(tokenizer, p, add_generation_prompt=True) for p in request.prompts]
    # The distributions are compared over each held-out answer; a prompt without one (a general
    # question) over the adapter's own greedy answer, the text the exported model should reproduce.
    answers = [answer or tokenizer.decode(ids, skip_special_tokens=True)
               for answer, ids in zip(request.answers, request.reference_ids)]
    pairs = [(p, a) for p, a in zip(request.prompts, answers) if a.strip()]
    conversations = [render(tokenizer, p + [{"role": "assistant", "content": a}]) for p, a in pairs]
    prompt_texts = [render(tokenizer, p, add_generation_prompt=True) for p, _ in pairs]
    hf_prompt_ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    levels: dict[str, dict] = {}
    reference_logits = None
    for level, path in files.items():
        model = GGUFModel(path, n_ctx=_context(hf_prompt_ids, conversations, tokenizer), logits_all=True)
        try:
            prompt_ids = [model.tokenize(t) for t in texts]
            answers = [model.greedy(ids, GGUF_NEW_TOKENS) for ids in prompt_ids]
            rows = [dict(compare_answers(want, got, tokenizer), prompt=p[-1]["content"])
                    for p, want, got in zip(request.prompts, request.reference_ids, answers)]
            spans = [(len(model.tokenize(p)), model.tokenize(c)) for p, c in zip(prompt_texts, conversations)]
            logits = [model.logits(ids)[start - 1:len(ids) - 1] for start, ids in spans]
        finally:
            model.close()
        agree = sum(r["agree_first"] >= AGREE_TOKENS or r["equal"] for r in rows)
        entry = {"equal": sum(r["equal"] for r in rows), "agree_first_8": agree, "total": len(rows), "rows": rows,
                 "same_prompt_tokens": sum(a == b for a, b in zip(prompt_ids, hf_prompt_ids))}
        if reference_logits is None:
            reference_logits = logits
        else:
            entry.update(distribution_stats(reference_logits, logits))
        levels[level] = judge_level(level, entry)
    failed = [level for level, entry in levels.items() if not entry["passed"]]
    # f16 is judged even when it was only the quantizer's source: a wrong f16 means a wrong conversion.
    return {"levels": levels, "passed": not failed, "failed": failed,
            "summary": msg("gguf_export.check_summary", agree=levels["f16"]["agree_first_8"], total=levels["f16"]["total"],
                           tokens=AGREE_TOKENS).to_dict()}


def _context(prompt_ids, conversations, tokenizer) -> int:
    longest = max([len(ids) for ids in prompt_ids] + [len(tokenizer(c)["input_ids"]) for c in conversations] + [1])
    return max(256, longest + GGUF_NEW_TOKENS + 64)


def _stop_ids(model_dir: Path, tokenizer) -> list[int]:
    """What the exported model stops on in Chat, Evaluate and the server: the same rule for the GGUF."""
    from transformers import GenerationConfig

    try:
        config = GenerationConfig.from_pretrained(model_dir)
    except OSError:  # no generation_config.json: the tokenizer's EOS alone
        config = None
    return stop_token_ids(tokenizer, config)


def export_lora_gguf(checkpoint: Path, base_dir: str, out_dir: Path, name: str, outtype: str) -> dict:
    """The adapter alone as a GGUF LoRA (llama.cpp's --lora, Ollama's ADAPTER) beside a base GGUF."""

    config = json.loads((checkpoint / "adapter_config.json").read_text(encoding="utf-8"))
    if config.get("use_dora"):
        raise ExportError(msg("gguf_export.dora_refused"))
    if outtype not in LORA_TYPES:
        raise ExportError(msg("gguf_export.lora_type", outtype=outtype, types=", ".join(LORA_TYPES)))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{name}-lora-{outtype}.gguf"
    partial = target.with_name(target.name + ".partial")
    tools.convert_lora(checkpoint, Path(base_dir), partial, outtype, out_dir / "convert.log")
    partial.rename(target)
    return {"file": target.name, "bytes": target.stat().st_size, "outtype": outtype}


def _ollama_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name.lower()).strip("-.") or "finetuned"


def _mb(size: int) -> str:
    return f"{size / 1e6:.0f} MB" if size < 1e9 else f"{size / 1e9:.2f} GB"


def size_preview(checkpoint: Path, workspace, levels: list[str]) -> dict[str, int]:
    """Bytes of each GGUF level for this checkpoint's model (the base's parameter count), before starting."""

    checkpoint = Path(checkpoint)
    if checkpoint_kind(checkpoint) == "full":
        folder = checkpoint
    else:
        folder = Path(base_model_for(checkpoint, find_run_dir(checkpoint), workspace, None, resolve=True).path)
    return planned_sizes(folder, tools.parse_levels(levels))
