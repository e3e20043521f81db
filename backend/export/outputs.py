"""File-level helpers of the export: what a checkpoint is, where its base model
is, sizes and free disk, the output folder's staging / publish / zip."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from safetensors import safe_open

from backend.export.model_card import run_config
from backend.messages import UserError, msg
from backend.models.hub_cache import cached_snapshot, hub_id_of, looks_like_hub_id
from backend.models.loading import estimate_num_parameters, needs_build, resolve_model_path
from backend.models.offline import OFFLINE_MODELS
from backend.runs.files import CONFIG_FILE

# Files a Trainer checkpoint holds only for resuming: not part of an exported model.
RESUME_ONLY = ("optimizer.pt", "scheduler.pt", "scaler.pt", "training_args.bin", "trainer_state.json", "COMPLETE")
RESUME_PREFIXES = ("rng_state",)
BYTES_PER_PARAM = {"bf16": 2, "fp16": 2, "fp32": 4}
STORED_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
# Headroom over the weights: tokenizer, JSON files, the zip's own overhead.
DISK_MARGIN = 1.1
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


class ExportError(UserError, RuntimeError):
    """An export that cannot go ahead; the message says why and what to do."""


def checkpoint_kind(folder: Path) -> str:
    """'adapter' (PEFT folder) or 'full' (whole-model weights)."""
    if (folder / "adapter_config.json").is_file():
        return "adapter"
    if (folder / "config.json").is_file() and (any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))):
        return "full"
    raise ExportError(msg("export.not_checkpoint", folder=folder))


def find_run_dir(checkpoint: Path) -> Path | None:
    """The run folder holding `checkpoint` (it has config.yaml), if any."""
    parent = Path(checkpoint).resolve().parent
    return parent if (parent / CONFIG_FILE).is_file() else None


def _run_config(run_dir: Path | None) -> dict:
    return run_config(run_dir)


@dataclass(frozen=True)
class BaseModel:
    """The adapter's base: as the run (or --base) names it, the folder with its weights, its hub id."""
    name: str                 # hub id, 'demo' or a folder
    path: str | None = None   # local folder (found only when asked to resolve)
    hub_id: str | None = None  # what the model card's base_model says; None for a local-only model


def base_model_for(checkpoint: Path, run_dir: Path | None, workspace, override: str | None,
                   resolve: bool) -> BaseModel:
    """The adapter's base: --base, else the run's model_name_or_path, else adapter_config.json.

    With `resolve`, its folder: the demo model, a local folder, or for a hub id the snapshot in
    the Hugging Face cache that training loaded it from (looked up offline)."""

    trained_on = _run_config(run_dir).get("model_name_or_path") or _adapter_base(checkpoint)
    name = (override or "").strip() or trained_on
    if not name:
        raise ExportError(msg("export.unknown_base", checkpoint=checkpoint))
    # The card names the hub model the adapter was trained on, even when --base points at a copy of it.
    hub_id = next((n for n in (trained_on, name) if n and looks_like_hub_id(n)), None)
    hub_id = hub_id or hub_id_of(name) or (hub_id_of(trained_on) if trained_on else None)
    if hub_id is None and trained_on in OFFLINE_MODELS:  # dequantized from a GGUF file of that hub model
        hub_id = OFFLINE_MODELS[trained_on].hub_id
    if not resolve:
        return BaseModel(name, None, hub_id)
    return BaseModel(name, _base_folder(name, workspace), hub_id)


def _adapter_base(checkpoint: Path) -> str | None:
    try:
        return json.loads((checkpoint / "adapter_config.json").read_text(encoding="utf-8"))["base_model_name_or_path"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _base_folder(name: str, workspace) -> str:
    path = resolve_model_path(name, workspace.models_dir) if workspace else name
    if Path(path).expanduser().is_dir():
        return str(Path(path).expanduser())
    if looks_like_hub_id(name):
        folder, why_not = cached_snapshot(name)
        if folder is not None:
            return str(folder)
        raise ExportError(msg("export.base_not_cached", name=name, why=why_not))
    raise ExportError(msg("export.base_not_local", name=name, path=path))


# What an adapter's shapes depend on: a base that differs in one of these cannot take it.
ARCHITECTURE_KEYS = ("model_type", "hidden_size", "num_hidden_layers")


def check_base_matches(checkpoint: Path, run_dir: Path | None, workspace, override: str | None) -> None:
    """Refuses a --base whose architecture is not the one the run trained on, from the two config.json
    files alone (before any weights load). Nothing to compare is no refusal: a base that must first be
    built or converted, or a run's base not on this disk (the merge itself then says what is wrong)."""

    trained_on = _run_config(run_dir).get("model_name_or_path") or _adapter_base(checkpoint)
    override = (override or "").strip()
    if not override or not trained_on or override == trained_on or workspace is None:
        return
    if needs_build(override, workspace.models_dir) or needs_build(trained_on, workspace.models_dir):
        return
    try:
        found, expected = _base_folder(override, workspace), _base_folder(trained_on, workspace)
    except ExportError:
        return
    facts = [_architecture(_base_config(folder)) for folder in (found, expected)]
    if None not in facts and facts[0] != facts[1]:
        raise ExportError(msg("export.base_other_architecture", path=override, trained=trained_on,
                              found=_said(facts[0]), expected=_said(facts[1])))


def _architecture(config: dict) -> tuple | None:
    text = config.get("text_config") or config
    values = tuple(text.get(key) for key in ARCHITECTURE_KEYS)
    return None if values[0] is None else values


def _said(facts: tuple) -> str:
    model_type, hidden, layers = facts
    return f"{model_type} ({layers} layers, hidden size {hidden})"


def is_qlora(run_dir: Path | None, checkpoint: Path) -> bool:
    config = _run_config(run_dir)
    return config.get("method") == "qlora" or bool(config.get("quantization_bits"))


def parse_size(text: str | int) -> int:
    """'2GB' / '500MB' / '1.5GiB' / bytes -> bytes."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise ExportError(msg("export.shard_size", text=text))
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "B").lower()])


def resolve_dtype(choice: str, base_path: str) -> str:
    """'auto' -> the base's stored 16-bit dtype; fp32 bases: bf16/fp16 on a GPU, fp32 on the CPU."""
    if choice != "auto":
        return choice
    stored = _base_config(base_path).get("dtype") or _base_config(base_path).get("torch_dtype")
    if STORED_DTYPES.get(stored) in ("bf16", "fp16"):
        return STORED_DTYPES[stored]
    import torch

    if torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "fp32"


def _base_config(base_path: str) -> dict:
    try:
        return json.loads((Path(base_path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def count_parameters(base_path: str) -> int:
    """Parameter count from the safetensors headers (no weights read), else from config numbers."""
    files = sorted(Path(base_path).glob("*.safetensors"))
    if files:
        total = 0
        for file in files:
            with safe_open(str(file), framework="pt") as handle:
                for key in handle.keys():  # noqa: SIM118 - safe_open has keys(), no __iter__
                    total += math.prod(handle.get_slice(key).get_shape())
        return total

    count = estimate_num_parameters(_base_config(base_path))
    if not count:
        raise ExportError(msg("export.unknown_size", path=base_path))
    return count


def disk_needed_for_merge(base_path: str, dtype: str) -> int:
    """Bytes the merged folder and its zip need: parameters x bytes per parameter, twice, plus margin."""
    return int(2 * count_parameters(base_path) * BYTES_PER_PARAM[dtype] * DISK_MARGIN)


def ensure_disk_space(folder: Path, needed: int) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise ExportError(msg("export.disk", folder=folder, needed=_gb(needed), free=_gb(free)))


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def prepare_output(out: Path, overwrite: bool) -> None:
    """Refuse an existing output (unless overwrite); clear a stale staging folder."""
    zip_path = out.with_name(out.name + ".zip")
    existing = [p for p in (out, zip_path) if p.exists()]
    if existing and not overwrite:
        raise ExportError(msg("export.exists", path=existing[0]))
    shutil.rmtree(out.parent / f".{out.name}.partial", ignore_errors=True)


def copy_files(checkpoint: Path, staging: Path) -> list[str]:
    """Copy a checkpoint's model files (not the resume-only ones) into `staging`."""
    staging.mkdir(parents=True)
    copied = []
    for item in sorted(checkpoint.iterdir()):
        if item.name in RESUME_ONLY or item.name.startswith(RESUME_PREFIXES) or not item.is_file():
            continue
        shutil.copy2(item, staging / item.name)
        copied.append(item.name)
    return copied


def publish(staging: Path, out: Path) -> None:
    """Move the finished staging folder to `out`, replacing an old one (overwrite was checked)."""
    if out.exists():
        old = out.with_name(f".{out.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        staging.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        staging.rename(out)


def write_zip(out: Path) -> Path:
    """<out>.zip beside the folder, written under a temporary name first."""
    tmp_base = out.with_name(f".{out.name}.zip-partial")
    archive = Path(shutil.make_archive(str(tmp_base), "zip", root_dir=out.parent, base_dir=out.name))
    final = out.with_name(out.name + ".zip")
    os.replace(archive, final)
    return final
