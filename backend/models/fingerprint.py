"""A short key that changes with a model's weights and its chat template: the
caches of the base model's own answers (replay, the learning report's base
answers) are kept per key, so a changed model or template answers anew."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def model_fingerprint(model_path: str | Path, tokenizer, *extra) -> str:
    """16 hex digits over the folder, its weight files' sizes and times, the chat template and `extra`."""
    folder = Path(model_path)
    stamps = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.glob("*.safetensors")) \
        if folder.is_dir() else [str(model_path)]
    text = json.dumps([str(folder.resolve()) if folder.is_dir() else str(model_path), stamps,
                       tokenizer.chat_template or "", *extra], default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
