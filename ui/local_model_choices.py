"""The models on this machine as choices, read from the scan's cache: the Train and Chat pickers'
(ui/panels/local_models_panel.py, which starts the background scan), the Export and Evaluate tabs'.
Nothing here scans or converts.

Export merges into transformers weights, so its base offers the Hugging Face folders and, of the
GGUF files, only those the conversion already made a folder of in this workspace (that folder is
the value). Evaluate benchmarks any model transformers can load: a GGUF file is converted once by
the benchmark job itself, so it is offered as its file.
"""

from __future__ import annotations

from pathlib import Path

from backend.models.gguf_source import converted_is_current
from backend.models.loading import gguf_folder
from backend.models.local.cli import human_size
from backend.models.local.places import SOURCE_LABELS, all_places, saved_folders
from backend.models.local.scan import ScanResult, cached_result


def places_of(root: Path):
    return all_places(saved_folders(root))


def found(root: Path) -> ScanResult | None:
    """The cached scan of this workspace's places, None before the first one ends."""
    return cached_result(root, places_of(root))


def label(model) -> str:
    return f"{model.name} · {SOURCE_LABELS.get(model.source, model.source)} · {human_size(model.size)}"


def merge_bases(root: Path, models_dir: Path) -> tuple[list[tuple[str, str]], int]:
    """((label, folder) of every base a merge can read, how many GGUF models were left out unconverted)."""

    result = found(root)
    offered, left_out = [], 0
    for model in result.models if result else []:
        if not model.trainable:
            continue
        if model.format == "hf":
            offered.append((label(model), model.path))
            continue
        source = Path(model.path)
        folder = gguf_folder(source, models_dir)
        if converted_is_current(folder, source.resolve()):
            offered.append((label(model), str(folder)))
        else:
            left_out += 1
    return offered, left_out


def loadable(root: Path) -> list[tuple[str, str]]:
    """(label, path) of every model found that transformers can load (a GGUF file: through its conversion)."""
    result = found(root)
    return [(label(m), m.path) for m in (result.models if result else []) if m.trainable]
