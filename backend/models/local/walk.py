"""The bounded walk under every scan: it always returns, and says what it left out.

Three bounds, each a skipped entry when it bites: a time budget for the whole scan, a depth below
each place, and an entry count per folder (a folder of 10,000 files is read up to the limit, not
listed whole). Folders are known by (device, inode), so a symlink back to an ancestor is seen once;
a folder or file it cannot read is skipped with the OS's reason. Nothing is written anywhere.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from backend.messages import Message, msg


@dataclass(frozen=True)
class Limits:
    seconds: float = 20.0         # the whole scan; a slow network mount ends here, not in a hang
    depth: int = 4                # folders below a place (publisher/model/file is 2)
    entries_per_folder: int = 2000


@dataclass
class Walk:
    limits: Limits = field(default_factory=Limits)
    skipped: list[tuple[str, Message]] = field(default_factory=list)
    stopped_early: bool = False
    started: float = field(default_factory=time.monotonic)
    seen: set[tuple[int, int]] = field(default_factory=set)

    def skip(self, path: Path | str, message: Message, early: bool = False) -> None:
        self.skipped.append((str(path), message))
        self.stopped_early = self.stopped_early or early

    def out_of_time(self, path: Path) -> bool:
        """True once the budget is spent; said once, at the path where the scan stopped."""
        if time.monotonic() - self.started <= self.limits.seconds:
            return False
        if not any(m.id == "local.time_budget" for _, m in self.skipped):
            self.skip(path, msg("local.time_budget", seconds=round(self.limits.seconds), path=path), early=True)
        return True

    def enter(self, folder: Path, quiet: bool = False) -> bool:
        """True the first time a folder is reached; a loop or an unreadable folder is skipped (`quiet`:
        without a word, for a place that is another place's folder or inside it, already listed)."""
        try:
            stat = folder.stat()
        except OSError as error:
            self.skip(folder, _os_reason(folder, error))
            return False
        key = (stat.st_dev, stat.st_ino)
        if key in self.seen:
            if not quiet:
                self.skip(folder, msg("local.symlink_loop", path=folder))
            return False
        self.seen.add(key)
        return True

    def entries(self, folder: Path) -> list[os.DirEntry]:
        """At most `entries_per_folder` entries of `folder`, sorted by name; [] when it cannot be read."""
        limit = self.limits.entries_per_folder
        found: list[os.DirEntry] = []
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    if len(found) == limit:
                        self.skip(folder, msg("local.too_many", path=folder, limit=limit), early=True)
                        break
                    found.append(entry)
        except OSError as error:
            self.skip(folder, _os_reason(folder, error))
        return sorted(found, key=lambda e: e.name)

    def folders(self, folder: Path) -> Iterator[Path]:
        """The sub-folders of `folder` (symlinked ones too), each entered once."""
        for entry in self.entries(folder):
            if self.out_of_time(folder):
                return
            path = Path(entry.path)
            if _is_dir(entry, self, path) and self.enter(path):
                yield path

    def model_paths(self, root: Path, depth: int = 0) -> Iterator[tuple[Path, bool]]:
        """(path, is_folder) of every *.gguf file and every folder holding a config.json under `root`;
        a model folder is not descended into."""
        if depth > self.limits.depth:
            self.skip(root, msg("local.too_deep", path=root, depth=self.limits.depth))
            return
        for entry in self.entries(root):
            if self.out_of_time(root):
                return
            path = Path(entry.path)
            if _is_dir(entry, self, path):
                if not self.enter(path):
                    continue
                try:  # a folder this user may not search raises here (pathlib's exists() lets EACCES through)
                    is_model = (path / "config.json").exists()
                except OSError as error:
                    self.skip(path, _os_reason(path, error))
                    continue
                if is_model:
                    yield path, True
                else:
                    yield from self.model_paths(path, depth + 1)
            elif entry.name.lower().endswith(".gguf"):
                yield path, False


def _is_dir(entry: os.DirEntry, walk: Walk, path: Path) -> bool:
    try:
        return entry.is_dir()  # follows a symlink; a link to itself raises ELOOP
    except OSError as error:
        walk.skip(path, _os_reason(path, error))
        return False


def _os_reason(path: Path, error: OSError) -> Message:
    if error.errno == errno.ELOOP:
        return msg("local.symlink_loop", path=path)
    return msg("local.unreadable", path=path, error=error.strerror or type(error).__name__)
