"""Where the tools people pull models with keep them, as each tool lays them out.

Read from the environment variables each tool itself honours, so a moved store is found where the
tool finds it. Nothing here touches the disk beyond reading the workspace's settings.json.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SOURCES = ("hf", "ollama", "lmstudio", "llamacpp", "folder")
SOURCE_LABELS = {"hf": "Hugging Face", "ollama": "Ollama", "lmstudio": "LM Studio", "llamacpp": "llama.cpp",
                 "folder": "folder"}
# The workspace's settings.json (backend/runs/workspace.py's Workspace.settings_file, a floor above
# this one) holds the folders a person adds in Settings under this key, one path per item.
SETTINGS_FILE = "settings.json"
FOLDERS_KEY = "model_folders"


@dataclass(frozen=True)
class Place:
    source: str  # one of SOURCES
    root: Path

    def key(self) -> str:
        return f"{self.source}:{self.root}"


def hub_cache(env: Mapping[str, str], home: Path) -> Path:
    """huggingface_hub's own order: HF_HUB_CACHE, else HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub."""
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    cache = Path(env.get("XDG_CACHE_HOME") or home / ".cache").expanduser()
    return Path(env.get("HF_HOME") or cache / "huggingface").expanduser() / "hub"


def default_places(env: Mapping[str, str] | None = None, home: Path | None = None) -> list[Place]:
    """The usual places on this machine, whether or not they exist (a missing one is simply empty)."""
    env = os.environ if env is None else env
    home = Path(home or Path.home())
    cache = Path(env.get("XDG_CACHE_HOME") or home / ".cache").expanduser()
    return [
        Place("hf", hub_cache(env, home)),
        Place("ollama", Path(env.get("OLLAMA_MODELS") or home / ".ollama" / "models").expanduser()),
        Place("lmstudio", home / ".lmstudio" / "models"),
        Place("lmstudio", cache / "lm-studio" / "models"),
        Place("llamacpp", Path(env.get("LLAMA_CACHE") or cache / "llama.cpp").expanduser()),
    ]


def saved_folders(workspace_root: Path) -> list[str]:
    """The folders kept under FOLDERS_KEY in the workspace's settings.json; [] when there are none."""
    try:
        settings = json.loads((Path(workspace_root) / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    folders = settings.get(FOLDERS_KEY) if isinstance(settings, dict) else None
    return [str(f) for f in folders if isinstance(f, str) and f.strip()] if isinstance(folders, list) else []


def parse_folders(text: str) -> list[str]:
    """A textbox of folders, one per line, as a clean list (blank lines and repeats dropped)."""
    seen: list[str] = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line and line not in seen:
            seen.append(line)
    return seen


def all_places(folders: list[str], env: Mapping[str, str] | None = None, home: Path | None = None) -> list[Place]:
    return [*default_places(env, home), *(Place("folder", Path(f).expanduser()) for f in folders)]
