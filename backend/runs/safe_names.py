"""File names from user text: the one place that turns what a person typed
(a run name, a dataset or export name, an upload's label) into a name that
stays inside the folder it is joined to.

`clean_name` makes a label usable (run folders, saved configs, suggested
dataset names); `checked_name` refuses a name the user chose explicitly
(a dataset or export folder) when cleaning would change it, so nobody gets a
folder under a name they did not pick; `path_inside` joins and checks.
"""

from __future__ import annotations

import re
from pathlib import Path

from backend.messages import Message, UserError, msg

# Letters, digits, '.', '_' and '-'; the first character a letter or digit, so
# no hidden files, no '.', no '..' and no option-looking names.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class UnsafeName(UserError, ValueError):
    """A name that would leave its folder or is not a plain file name; the message is catalogued."""


def clean_name(text: object, fallback: str, max_len: int = 40) -> str:
    """`text` with every run of other characters (separators, spaces, '..')
    turned into '-', trimmed to `max_len`; `fallback` when nothing is left."""
    cleaned = UNSAFE.sub("-", str(text or "")).replace("..", "-")
    cleaned = cleaned.strip("-.")[:max_len].strip("-.")
    return cleaned if NAME_RE.match(cleaned) else fallback


def checked_name(text: object, what: str | Message, max_len: int = 64) -> str:
    """`text` itself when it is already a plain, safe name; else UnsafeName.
    `what` names the field, e.g. msg("name.dataset"), so the refusal can be translated."""
    name = str(text) if isinstance(text, str) else ""
    if not name or len(name) > max_len or clean_name(name, "", max_len) != name:
        raise UnsafeName(msg("name.not_allowed", what=what, text=text, max_len=max_len))
    return name


def path_inside(folder: Path, name: str) -> Path:
    """folder / name, refused unless it resolves to a direct child of `folder`
    (a symlinked or crafted name that points elsewhere is caught here too)."""
    folder = Path(folder)
    path = folder / name
    if path.resolve().parent != folder.resolve():
        raise UnsafeName(msg("name.leaves_folder", name=name, folder=str(folder)))
    return path
