"""The names a served run answers to: `base`, each complete `checkpoint-<step>`
and `final`, read from the run folder (backend/chat/targets.py, the same
list the Chat tab offers). Without --checkpoint the list is re-read on each
lookup, so checkpoints a running training saves later are served too. With
--gguf, the one name is the GGUF file's stem (served_file), with --folder the folder's name, either
replaced by --name (a model on this machine: served_name makes its name safe)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from backend.chat.gguf_targets import file_target
from backend.chat.targets import BASE, ChatTarget, TargetError, run_choices, run_model_settings
from backend.runs.files import CONFIG_FILE
from backend.serve.protocol import ApiError
from backend.storage.safe_names import clean_name


class NamesError(ValueError):
    """The run or a chosen checkpoint cannot be served; the message says what to do."""


class ServedModels:
    def __init__(self, run_dir: Path, resolve_model, only: list[str] | None = None):
        """`resolve_model(name)` maps config.yaml's model name to a folder; `only` keeps
        the base plus these checkpoint names (checked now: NamesError lists the choices)."""
        self.run_dir = Path(run_dir)
        if not (self.run_dir / CONFIG_FILE).is_file():
            raise NamesError(f"{self.run_dir} is not a run folder (it has no {CONFIG_FILE}): "
                             "give --run workspace/runs/<run-id>.")
        self._resolve = resolve_model
        self._lock = threading.Lock()
        self._targets: dict[str, ChatTarget] = {}
        self._only = None
        found = self.refresh()
        if only:
            wanted = [Path(name).name for name in only]   # a folder path names its checkpoint too
            missing = [name for name in wanted if name not in found]
            if missing:
                raise NamesError(f"Run {self.run_dir.name} has no complete checkpoint named "
                                 f"{', '.join(missing)}; it has: {', '.join(found)}.")
            self._only = [BASE, *dict.fromkeys(n for n in wanted if n != BASE)]
            self._targets = {name: found[name] for name in self._only}

    @property
    def model_settings(self) -> dict:
        return run_model_settings(self.run_dir)

    def refresh(self) -> dict[str, ChatTarget]:
        """Re-read the run folder (unless a fixed list was chosen); name -> target."""
        with self._lock:
            if self._only is not None:
                return dict(self._targets)
            try:
                choices = run_choices(self.run_dir, self._resolve)
            except (OSError, ValueError, TargetError) as error:
                if self._targets:
                    return dict(self._targets)   # keep serving what we had while a file is rewritten
                raise NamesError(f"Cannot read run {self.run_dir}: {error}") from error
            self._targets = {target.name: target for target in choices.targets}
            return dict(self._targets)

    def names(self) -> list[str]:
        return list(self.refresh())

    def get(self, name: str) -> ChatTarget:
        targets = self._targets if name in self._targets else self.refresh()
        if name not in targets:
            raise ApiError(404, f"The model '{name}' does not exist on this server. Use one of: "
                                f"{', '.join(targets)}.", param="model", code="model_not_found")
        target = targets[name]
        if target.checkpoint and not Path(target.checkpoint).is_dir():
            raise ApiError(404, f"The model '{name}' was removed from disk; use one of: "
                                f"{', '.join(self.refresh())}.", param="model", code="model_not_found")
        return target

    def created(self, name: str) -> int:
        """Unix time the model's folder was written (stable across restarts)."""
        target = self._targets.get(name)
        folder = target.checkpoint if target and target.checkpoint else self.run_dir / CONFIG_FILE
        try:
            return int(os.stat(folder).st_mtime)
        except OSError:
            return 0


class ServedOne:
    """One model served under one name (`--gguf FILE` answered by llama.cpp, `--folder DIR` by
    transformers); the same lookups as ServedModels, so the routes and errors are the same."""

    def __init__(self, target: ChatTarget, name: str):
        self.target, self.name = target, name
        self._path = Path(target.checkpoint or target.model)

    def refresh(self) -> dict[str, ChatTarget]:
        return {self.name: self.target}

    def names(self) -> list[str]:
        return [self.name]

    def get(self, name: str) -> ChatTarget:
        if name != self.name:
            raise ApiError(404, f"The model '{name}' does not exist on this server. Use one of: {self.name}.",
                           param="model", code="model_not_found")
        if not self._path.exists():
            raise ApiError(404, f"The model '{name}' was removed from disk ({self._path}): restart the server with "
                                "a model that exists.", param="model", code="model_not_found")
        return self.target

    def created(self, name: str) -> int:
        try:
            return int(os.stat(self._path).st_mtime)
        except OSError:
            return 0


def served_file(gguf_file: Path, name: str | None = None) -> ServedOne:
    """One GGUF file, under `name` or the file's stem (`assistant-q4_k_m`)."""

    target = file_target(gguf_file)
    return ServedOne(target, name or target.name)


def served_folder(folder: Path, name: str | None = None) -> ServedOne:
    """One Hugging Face model folder (config.json, weights), answered as a run's base is, under `name` or
    the folder's name made safe."""
    name = name or served_name(Path(folder).name)
    return ServedOne(ChatTarget(model=str(folder), name=name), name)


def served_name(text: str) -> str:
    """A model name from a name found on disk (`smollm2:135m` -> `smollm2-135m`, `Org/Name` -> `Org-Name`):
    letters, digits, '.', '_', '-' only, so it reads the same in a URL, a JSON body and the panel's
    shell example (no quote, space or separator to escape)."""
    return clean_name(text, fallback="local-model", max_len=64)
