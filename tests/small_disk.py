"""A real small disk for tests: a size-limited tmpfs mounted over one folder in
a private mount namespace (`unshare -rm`, no root needed where user
namespaces are allowed). Everything that must see the small disk runs inside
that namespace; it reports back through stdout or files outside the folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path


@cache
def small_disk_available() -> bool:
    if not shutil.which("unshare"):
        return False
    with tempfile.TemporaryDirectory() as folder:
        result = subprocess.run(["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=1m tmpfs "$0"', folder],
                                capture_output=True, timeout=60)
    return result.returncode == 0


def run_on_small_disk(folder: Path, size: str, code: str, args: list[str], env: dict,
                      timeout: float = 900) -> subprocess.CompletedProcess:
    """Run `python -c code *args` with `folder` replaced by an empty tmpfs of `size` (e.g. '16m')."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    script = 'mount -t tmpfs -o size="$1" tmpfs "$0" && shift && exec "$@"'
    argv = ["unshare", "-rm", "sh", "-c", script, str(folder), size, sys.executable, "-c", code, *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=Path(__file__).resolve().parents[1])
