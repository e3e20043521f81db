"""The judge's answers on disk, workspace/.cache/judge/<key>.json, keyed by the
endpoint (URL and model), the whole prompt text and the answers judged, so a
rerun of the same judgement makes no call and a changed template, answer or
judge makes new ones. The API key is not part of the key (the same judge
behind a rotated key answers the same)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from backend.storage.atomic_files import atomic_write_json, read_json

CACHE_DIR = ".cache/judge"


def cache_key(identity: str, prompt: str, answers: tuple[str, ...]) -> str:
    payload = json.dumps([identity, prompt, list(answers)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class JudgeCache:
    def __init__(self, workspace_root: Path):
        self.folder = Path(workspace_root) / CACHE_DIR

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> str | None:
        entry = read_json(self._path(key), default=None)
        return entry.get("answer") if isinstance(entry, dict) and isinstance(entry.get("answer"), str) else None

    def put(self, key: str, answer: str) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, {"answer": answer})

    def has(self, key: str) -> bool:
        return self.get(key) is not None
