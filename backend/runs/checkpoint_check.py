"""Is a checkpoint marked complete really readable? What resume checks before it loads one.

The marker says the save finished; a filesystem error or a power cut after it
can still leave files empty or cut (a "complete" checkpoint once held an
empty trainer_state.json and resume crashed with a JSONDecodeError). Cheap
checks only: JSON files parse, safetensors files hold their whole header and
every byte it promises, other files are not empty.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from backend.messages import Message, msg

STATE_FILE = "trainer_state.json"


def checkpoint_problem(folder: Path) -> Message | None:
    """Why `folder` cannot be resumed from (its first unreadable file), or None."""
    folder = Path(folder)
    if not (folder / STATE_FILE).is_file():
        return msg("checkpoint.missing", file=STATE_FILE)
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")):
        problem = _file_problem(path)
        if problem is not None:
            return msg("checkpoint.unreadable", file=path.name, problem=problem)
    return None


def _file_problem(path: Path) -> str | None:
    size = path.stat().st_size
    if size == 0:
        return "it is empty"
    if path.suffix == ".json":
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            return f"it is not valid JSON ({error})"
        if path.name == STATE_FILE and not (isinstance(value, dict) and "global_step" in value):
            return "it has no global_step"
    elif path.suffix == ".safetensors":
        return _safetensors_problem(path, size)
    return None


def _safetensors_problem(path: Path, size: int) -> str | None:
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return f"it is cut off ({size} bytes)"
        (header_len,) = struct.unpack("<Q", head)
        if header_len + 8 > size:
            return f"it is cut off ({size:,} bytes, its header alone needs {header_len + 8:,})"
        try:
            header = json.loads(f.read(header_len))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return "its header is not readable"
    end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    if 8 + header_len + end > size:
        return f"it is cut off ({size:,} of {8 + header_len + end:,} bytes)"
    return None
