"""Last used choices (language, dataset, model, form values) kept in the
workspace's settings.json, so the next launch opens where the user left off.

The file is small JSON, rewritten whole through a temporary file + rename so a
crash mid-write never leaves half a file. A missing or unreadable file means
"no saved settings", never an error: losing preferences must not stop the app.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from backend.runs.workspace import Workspace

# Decisions that belong to one model and one run, never carried to the next
# launch silently: running a model's own Python code (`trust_remote_code`) is
# ticked by the user for the model on screen, and starts off for every other
# model and after every restart. Older settings files that hold it are ignored.
NEVER_REMEMBERED = {"train": ("trust_remote_code",)}


def load_settings(workspace: Workspace) -> dict[str, Any]:
    """The saved settings, or {} when there are none (or they cannot be read)."""
    try:
        data = json.loads(workspace.settings_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return _forget(data) if isinstance(data, dict) else {}


def _forget(settings: dict[str, Any]) -> dict[str, Any]:
    for section, keys in NEVER_REMEMBERED.items():
        if isinstance(settings.get(section), dict):
            settings[section] = {k: v for k, v in settings[section].items() if k not in keys}
    return settings


def save_settings(workspace: Workspace, **values: Any) -> dict[str, Any]:
    """Merge `values` into the saved settings (None removes a key); returns the result."""
    settings = load_settings(workspace)
    for key, value in values.items():
        if value is None:
            settings.pop(key, None)
        else:
            settings[key] = value
    settings = _forget(settings)
    _write_atomic(workspace.settings_file, json.dumps(settings, indent=2, ensure_ascii=False, sort_keys=True))
    return settings


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".settings-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
