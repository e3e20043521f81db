"""Models on this machine as chat targets: the entries of the workspace's cached scan
(backend/models/local/scan.py, the list the Train tab shows), read back, never scanned on the
request path: the UI starts the scan in the background and the lists pick it up when it ends.

A GGUF entry (an Ollama blob, an LM Studio or llama.cpp file) answers through llama.cpp with the
file's own `tokenizer.chat_template` (no export tokenizer stands beside it), so it may be an
architecture transformers cannot convert; a Hugging Face folder answers through transformers as
a run's base does, so it needs a model_type and weights (the scan's trainable). Both are read in
place: nothing is written into the other tool's folder."""

from __future__ import annotations

from pathlib import Path

from backend.chat.targets import BASE, GGUF, ChatTarget
from backend.models.local.describe import LocalModel
from backend.models.local.places import all_places, saved_folders
from backend.models.local.scan import cached_result

LOCAL = "local@"   # a dropdown value: local@<the model's path>, unique per file or folder


def cached_models(workspace_root: Path) -> list[LocalModel]:
    """The cached scan of this workspace's places; [] before the first scan ends."""
    result = cached_result(workspace_root, all_places(saved_folders(workspace_root)))
    return result.models if result else []


def chattable(model: LocalModel) -> bool:
    """llama.cpp answers any GGUF file the scan read; transformers a folder it can load."""
    return model.format == "gguf" or model.trainable


def local_target(model: LocalModel) -> ChatTarget:
    """The column of one model found on disk, named as the list names it (`smollm2:135m`, `Org/Name`)."""
    if model.format == "gguf":
        return ChatTarget(model=model.path, checkpoint=model.path, kind=GGUF, name=model.name, origin=model.source)
    return ChatTarget(model=model.path, kind=BASE, name=model.name, origin=model.source)


def local_targets(workspace_root: Path) -> dict[str, ChatTarget]:
    """value -> target of every chattable model of the cached scan still on disk, in the scan's order
    (two Ollama tags of one blob are one file: the first name is kept)."""
    targets: dict[str, ChatTarget] = {}
    for model in cached_models(workspace_root):
        value = f"{LOCAL}{model.path}"
        if value not in targets and chattable(model) and Path(model.path).exists():
            targets[value] = local_target(model)
    return targets
