"""Writes a reader never sees half of, and the reads that go with them.

A file is written to a tmp sibling and renamed over its name (`atomic_write_*`);
a folder is built aside and renamed into place (`build_folder`). `sync_tree` and
`fsync_dir` put files and folder entries on the disk before a marker says they
are there (backend/runs/files.py:mark_complete)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    # Unique per process and thread: two writers must never share a tmp file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk must not also leave a stray tmp file
        raise


def build_folder(target: Path, prefix: str, build: Callable[[Path], None]) -> Path:
    """`build(staging)` into a temporary sibling of `target`, then renamed over it (a symlink or an
    older folder is replaced): a crash never leaves half a folder under `target`'s name. The caller
    holds the lock that keeps two builders apart."""

    target = Path(target)
    staging = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    staging.chmod(0o755)  # mkdtemp's 0700 would hide the folder from other users of a shared server
    try:
        build(staging)
        if target.is_symlink():  # tests link a shared cached build here
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return default


def sync_tree(folder: Path) -> None:
    for path in sorted(Path(folder).rglob("*"), key=lambda p: -len(p.parts)):   # files before their folders
        if path.is_symlink():
            continue
        if path.is_dir():
            fsync_dir(path)
        else:
            fsync_file(path)
    fsync_dir(folder)


def fsync_file(path: Path) -> None:
    """The file's written pages on the disk (whoever wrote them: the kernel syncs the inode)."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def fsync_dir(folder: Path) -> None:
    """A folder's entries (new names, renames) reach the disk only with an fsync of the folder itself."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
