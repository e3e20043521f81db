"""The user's cache folder for one-time builds that outlive a checkout: llama.cpp's wheel,
vLLM's CPU environment, the test suite's converted models. The Makefile computes the same path."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "FINETUNE_STUDIO_CACHE"


def user_cache_dir() -> Path:
    """$FINETUNE_STUDIO_CACHE, else $XDG_CACHE_HOME/finetune-studio, else ~/.cache/finetune-studio."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "finetune-studio"
