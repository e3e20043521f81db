"""A GGUF file as a model source: checked, then converted once into a plain
Hugging Face folder under workspace/models/<name>/ and reused afterwards.

transformers reads a GGUF (`from_pretrained(DIR, gguf_file=NAME)`) and
dequantizes every tensor to fp32, but the model it returns is marked quantized
and refuses `save_pretrained`. Rebuilt from its config without
`quantization_config` and given the same state dict, it saves, and its greedy
answers are token-identical. The conversion runs in a temporary sibling folder
under a file lock and is renamed into place, so a crash or a second process
never leaves half a model; SOURCE_FILE, written last, says which GGUF file
(path, size, modification time) the folder was made from.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from backend.messages import UserError, msg
from backend.models.gguf_header import check_gguf_header
from backend.storage.atomic_files import build_folder
from backend.storage.file_lock import file_lock

SOURCE_FILE = "GGUF_SOURCE.json"
GGUF_MAGIC = b"GGUF"
CONVERT_STEPS = 4  # header, tokenizer, tensors, save: the progress the UI shows
# Disk needed beyond the fp32 weights: tokenizer files, the model card, and
# safetensors' header; generous so a nearly full disk fails before, not during.
DISK_MARGIN_BYTES = 256 * 2**20


class GGUFSourceError(UserError, ValueError):
    """A GGUF file that cannot become a model folder; the message says why and what to do."""


@dataclass(frozen=True)
class GGUFInfo:
    path: Path
    architecture: str
    name: str | None
    file_type: str  # e.g. "Q4_1", "Q4_K_M", "F16"
    tensor_elements: int
    context_length: int | None
    origin: str | None  # the original repository named in the metadata (general.base_model.* / source.*)

    @property
    def fp32_bytes(self) -> int:
        return 4 * self.tensor_elements


def find_gguf(path: str | Path) -> Path | None:
    """The GGUF file behind `path`: the file itself, or the only .gguf in a folder
    that is not already a Hugging Face model folder; None when `path` is neither."""
    path = Path(path).expanduser()
    if path.is_file():
        return path if path.suffix.lower() == ".gguf" or has_gguf_magic(path) else None
    if path.is_dir() and not (path / "config.json").exists():
        files = sorted(p for p in path.glob("*.gguf") if "mmproj" not in p.name.lower())
        if len(files) > 1:
            raise GGUFSourceError(msg("gguf.several", folder=path, files=", ".join(p.name for p in files)))
        return files[0] if files else None
    return None


def has_gguf_magic(path: Path) -> bool:
    """Whether the file starts with GGUF's magic bytes (an Ollama blob has no .gguf suffix)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == GGUF_MAGIC
    except OSError:
        return False


def read_gguf_info(path: Path) -> GGUFInfo:
    """Header facts of a GGUF file, with a sentence for every file transformers cannot convert."""
    import gguf
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    if not has_gguf_magic(path):
        raise GGUFSourceError(msg("gguf.not_gguf", path=path))
    if _split_part(path.name):
        raise GGUFSourceError(msg("gguf.split", path=path))
    try:
        check_gguf_header(path)  # gguf's reader trusts the header's counts (an array of 2**40 items)
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError, IndexError, KeyError) as error:  # a cut or damaged header or tensor table
        raise GGUFSourceError(msg("gguf.truncated", path=path, error=error)) from error
    fields = {key: _field_value(field) for key, field in reader.fields.items()}
    if int(fields.get("split.count") or 1) > 1:
        raise GGUFSourceError(msg("gguf.split", path=path))
    kind = str(fields.get("general.type") or "model")
    architecture = str(fields.get("general.architecture") or "")
    if kind == "adapter" or "adapter.type" in fields:
        raise GGUFSourceError(msg("gguf.adapter", path=path))
    if kind == "mmproj" or architecture == "clip":
        raise GGUFSourceError(msg("gguf.mmproj", path=path))
    # transformers' table also holds the "general" and "tokenizer" sections; llama.cpp writes
    # qwen2moe where transformers says qwen2_moe.
    supported = sorted(set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"})
    if _plain(architecture) not in {_plain(a) for a in supported}:
        raise GGUFSourceError(msg("gguf.architecture", path=path, architecture=architecture or "unknown",
                                  supported=", ".join(supported)))
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    if end > path.stat().st_size:
        raise GGUFSourceError(msg("gguf.truncated", path=path, error=f"tensor data ends at byte {end}, "
                                  f"the file has {path.stat().st_size}"))
    return GGUFInfo(path=path, architecture=architecture, name=fields.get("general.name"),
                    file_type=_file_type_name(fields.get("general.file_type"), reader),
                    tensor_elements=sum(int(t.n_elements) for t in reader.tensors),
                    context_length=fields.get(f"{architecture}.context_length"),
                    origin=_origin(fields))


def _plain(architecture: str) -> str:
    return architecture.replace("-", "").replace("_", "").lower()


def _split_part(name: str) -> bool:
    """llama.cpp's split files are named NAME-00001-of-00003.gguf."""

    return re.search(r"-\d{5}-of-\d{5}\.gguf$", name) is not None


def _field_value(field):
    try:
        return field.contents()
    except (ValueError, IndexError, TypeError):
        return None


def _file_type_name(code, reader) -> str:
    import gguf

    try:
        return gguf.LlamaFileType(int(code)).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except (TypeError, ValueError):
        types = sorted({t.tensor_type.name for t in reader.tensors})
        return "+".join(types) or "unknown"


def _origin(fields: dict) -> str | None:
    """The repository this file was made from, where its metadata names one."""
    for key in ("general.base_model.0.repo_url", "general.base_model.0.organization", "general.source.repo_url",
                "general.source.url", "general.source.huggingface.repository"):
        value = fields.get(key)
        if value:
            if key.endswith("organization") and fields.get("general.base_model.0.name"):
                return f"{value}/{fields['general.base_model.0.name']}"
            return str(value).removeprefix("https://huggingface.co/")
    return None


# ---------------------------------------------------------------- conversion

def converted_is_current(folder: Path, source: Path) -> bool:
    """True when `folder` was converted from `source` as it is now (same path, size and mtime)."""
    try:
        recorded = json.loads((folder / SOURCE_FILE).read_text(encoding="utf-8"))
        stat = source.stat()
    except (OSError, ValueError):
        return False
    return (recorded.get("path") == str(source.resolve()) and recorded.get("size") == stat.st_size
            and recorded.get("mtime_ns") == stat.st_mtime_ns)


def ensure_converted(source: Path, target: Path, progress: Callable[[int, int], None] | None = None,
                     card_note: str = "") -> Path:
    """`target`, converted from the GGUF file `source` first when missing or made from another file."""
    source = Path(source).expanduser().resolve()
    target = Path(target)
    if converted_is_current(target, source):
        return target
    info = read_gguf_info(source)  # a file that cannot become a model is refused before anything is written
    target.parent.mkdir(parents=True, exist_ok=True)
    _check_disk(target.parent, info)
    # Removed on release: a refused conversion leaves nothing in models/, its lock file included.
    with file_lock(target.parent / f".{target.name}.lock", remove=True):
        if converted_is_current(target, source):  # another process converted it meanwhile
            return target
        return build_folder(target, f".{target.name}-convert-",
                            lambda staging: _convert(info, staging, progress or (lambda step, steps: None), card_note))


def _check_disk(folder: Path, info: GGUFInfo) -> None:
    needed = info.fp32_bytes + DISK_MARGIN_BYTES
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise GGUFSourceError(msg("gguf.disk", path=info.path, needed_gb=round(needed / 2**30, 2),
                                  free_gb=round(free / 2**30, 2), folder=folder))


def _convert(info: GGUFInfo, out: Path, progress: Callable[[int, int], None], card_note: str) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(info.path.parent), info.path.name
    progress(1, CONVERT_STEPS)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        progress(2, CONVERT_STEPS)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except (ValueError, KeyError, NotImplementedError, RuntimeError) as error:
        raise GGUFSourceError(msg("gguf.convert_failed", path=info.path, error=str(error).splitlines()[0])) from error
    progress(3, CONVERT_STEPS)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config = AutoConfig.for_model(**config.to_dict())
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), assign=True, strict=True)
    model.tie_weights()
    model.generation_config = loaded.generation_config
    del loaded
    if info.context_length:
        tokenizer.model_max_length = int(info.context_length)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "README.md").write_text(model_card(info, card_note), encoding="utf-8")
    stat = info.path.stat()
    (out / SOURCE_FILE).write_text(json.dumps({
        "path": str(info.path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "file_type": info.file_type,
        "architecture": info.architecture, "origin": info.origin, "converted_at": time.time()}, indent=2),
        encoding="utf-8")
    progress(4, CONVERT_STEPS)


def model_card(info: GGUFInfo, note: str = "") -> str:
    lines = [f"# {info.name or info.path.stem}", "",
             f"Converted by FineTune Studio from the GGUF file `{info.path.name}` ({info.file_type}, "
             f"architecture `{info.architecture}`).", "",
             f"The weights were **dequantized from a {info.file_type} file** to fp32: they carry that "
             "quantization's rounding, so this folder is close to, not equal to, the original model."]
    if info.origin:
        lines += ["", f"The file's metadata names the original repository `{info.origin}`. Where the hub is "
                      f"reachable, train on `{info.origin}` instead: its weights are the unrounded ones."]
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"
