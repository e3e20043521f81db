"""One model found on disk, described from its headers alone: no weights are loaded.

A GGUF file is read through backend/models/gguf_header.py's bounded walk (never gguf's reader on a
file nobody checked): architecture, name, licence, file type, and the parameter count from its
tensor shapes. A Hugging Face folder is read from config.json and each safetensors file's JSON
header (8 bytes of length, then the tensors' dtypes and shapes).
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from backend.messages import Message, UserError, msg
from backend.models.gguf_header import GGUFLayoutError, read_gguf_header
from backend.models.gguf_source import has_gguf_magic
from backend.models.local.fit import gguf_config, gguf_refusal

MAX_SAFETENSORS_HEADER = 100 * 2**20  # safetensors' own limit on the JSON header (bytes)
README_BYTES = 4096                    # a model card's front matter, where `license:` is
WEIGHT_GLOBS = ("*.safetensors", "pytorch_model*.bin")


class SkipModel(UserError, ValueError):
    """A file or folder that is not a usable model; its message is the reason shown in `skipped`."""


@dataclass
class LocalModel:
    name: str               # what the list shows: Org/Name, name:tag (Ollama), the file's stem
    source: str             # places.SOURCES
    path: str               # what the Train form passes on: the GGUF file or the model folder
    size: int               # bytes on disk
    format: str             # "gguf" | "hf"
    architecture: str | None
    parameters: int | None
    quantisation: str | None  # GGUF file type (Q4_K_M, F16) or the safetensors dtypes (BF16)
    licence: str | None
    trainable: bool
    reason: Message | None  # why not, when not trainable
    title: str | None = None  # the metadata's own name (general.name)
    config: dict | None = None  # the architecture numbers the fit is estimated from
    fits: bool | None = None
    memory_gb: float | None = None
    device: str | None = None

    def to_dict(self) -> dict:
        return {**asdict(self), "reason": self.reason.to_dict() if self.reason else None}

    @classmethod
    def from_dict(cls, data: dict) -> LocalModel:
        return cls(**{**data, "reason": Message.from_dict(data.get("reason"))})

    def as_json(self) -> dict:
        """The command line's --json object: the reason in English, no internal numbers."""
        data = {k: v for k, v in self.to_dict().items() if k != "config"}
        return {**data, "reason": str(self.reason) if self.reason else None}


def describe_gguf(path: Path, name: str, source: str, supported: tuple[str, ...]) -> LocalModel:
    """A GGUF file's entry; SkipModel when it is not a GGUF file or its header is damaged."""
    if not has_gguf_magic(path):
        raise SkipModel(msg("gguf.not_gguf", path=path))
    try:
        header = read_gguf_header(path)
        size = path.stat().st_size
    except (GGUFLayoutError, OSError, struct.error) as error:
        raise SkipModel(msg("local.bad_gguf", path=path, error=error)) from None
    fields = header.fields
    reason = gguf_refusal(path, fields, supported)
    return LocalModel(
        name=name, source=source, path=str(path), size=size, format="gguf",
        architecture=fields.get("general.architecture"),
        parameters=sum(math.prod(shape) for _, shape, _ in header.tensors) or None,
        quantisation=_gguf_quantisation(fields, header.tensors), licence=fields.get("general.license"),
        trainable=reason is None, reason=reason, title=fields.get("general.name"),
        config=gguf_config(fields, header.arrays, {t[0] for t in header.tensors}))


def _gguf_quantisation(fields: dict, tensors: list) -> str | None:
    import gguf

    try:
        return gguf.LlamaFileType(int(fields["general.file_type"])).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except (KeyError, TypeError, ValueError):
        counts = Counter(kind for _, _, kind in tensors)
        names = []
        for kind, _ in counts.most_common(3):
            try:
                names.append(gguf.GGMLQuantizationType(kind).name)
            except ValueError:
                names.append(f"type {kind}")
        return "+".join(names) or None


def describe_folder(folder: Path, name: str, source: str) -> LocalModel:
    """A Hugging Face model folder's entry (untrainable, with the reason, when config or weights are
    missing); SkipModel when it has no readable config.json at all."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as error:
        raise SkipModel(msg("local.no_config", path=folder, error=error)) from None
    weights = sorted({p for pattern in WEIGHT_GLOBS for p in folder.glob(pattern)})
    reason = None
    if not config.get("model_type"):
        reason = msg("local.no_model_type", path=folder)
    elif not weights:
        reason = msg("local.no_weights", path=folder)
    parameters, dtypes = _safetensors_facts([w for w in weights if w.suffix == ".safetensors"])
    text = config.get("text_config") or config
    return LocalModel(
        name=name, source=source, path=str(folder), size=sum(_size(p) for p in folder.iterdir()),
        format="hf", architecture=text.get("model_type") or config.get("model_type"), parameters=parameters,
        quantisation=_folder_quantisation(config, dtypes), licence=config.get("license") or _card_licence(folder),
        trainable=reason is None, reason=reason, config=text)


def _safetensors_facts(files: list[Path]) -> tuple[int | None, list[str]]:
    """(parameters, dtypes by count) from the files' headers; (None, []) when none can be read."""
    total, dtypes = 0, Counter()
    for path in files:
        try:
            with open(path, "rb") as handle:
                (length,) = struct.unpack("<Q", handle.read(8))
                if length > min(MAX_SAFETENSORS_HEADER, path.stat().st_size):
                    continue  # a damaged header; loading it says so
                header = json.loads(handle.read(length))
        except (OSError, ValueError, struct.error):
            continue
        for key, tensor in header.items():
            if key != "__metadata__" and isinstance(tensor, dict):
                count = math.prod(tensor.get("shape") or [])
                total += count
                dtypes[str(tensor.get("dtype"))] += count
    return (total or None), [d for d, _ in dtypes.most_common()]


def _folder_quantisation(config: dict, dtypes: list[str]) -> str | None:
    quantisation = config.get("quantization_config")
    if isinstance(quantisation, dict) and quantisation.get("quant_method"):
        return str(quantisation["quant_method"])
    return dtypes[0] if dtypes else config.get("torch_dtype") or config.get("dtype")


def _card_licence(folder: Path) -> str | None:
    try:
        with open(folder / "README.md", encoding="utf-8", errors="replace") as handle:
            head = handle.read(README_BYTES)
    except OSError:
        return None
    found = re.search(r"^license:\s*['\"]?([^\s'\"]+)", head, re.MULTILINE) if head.startswith("---") else None
    return found.group(1) if found else None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size  # a hub snapshot's files are symlinks into blobs/: their targets count
    except OSError:
        return 0
