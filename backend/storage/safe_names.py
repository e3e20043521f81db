"""File names from user text: the one place that turns what a person typed
(a run name, a dataset or export name, an upload's label) into a name that
stays inside the folder it is joined to.

The rule is about paths, not alphabets: a name keeps the letters and digits of
any script ("中文测试", "Größe", "हिन्दी") and '.', '_', '-'; it never holds a
separator, a control or format character, '..' or a leading dot or dash, and
it fits a file system's 255-byte name limit with room for the suffixes the
app adds. Text is NFC-normalised first, so "ö" typed as o + U+0308 names the
same folder as the single character.

`clean_name` makes a label usable (run folders, saved configs, suggested
dataset names); `checked_name` refuses a name the user chose explicitly
(a dataset or export folder) when cleaning would change it, so nobody gets a
folder under a name they did not pick; `path_inside` joins and checks.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from backend.messages import Message, UserError, msg

EXTRA = "._-"  # the punctuation a name may hold besides letters, digits and combining marks
# UTF-8 bytes of one name: file systems take 255; the rest is left for what the app
# appends ("-clean", "-2", "-20250101-120000.yaml", ".json").
MAX_BYTES = 200


class UnsafeName(UserError, ValueError):
    """A name that would leave its folder or is not a plain file name; the message is catalogued."""


def _starts(char: str) -> bool:
    """A letter or digit of any script may begin a name."""
    return unicodedata.category(char)[0] in "LN"


def _allowed(char: str) -> bool:
    """Letters, digits, combining marks (the vowel signs of Devanagari, decomposed accents) and EXTRA.
    Separators, spaces, controls and format characters (bidi overrides, zero-width) are not."""
    return unicodedata.category(char)[0] in "LNM" or char in EXTRA


def is_plain_name(name: object, max_bytes: int = MAX_BYTES) -> bool:
    """True for a name that is safe to join to a folder as it is (already NFC)."""
    return (isinstance(name, str) and bool(name) and _starts(name[0]) and all(map(_allowed, name))
            and ".." not in name and not name.endswith(("-", ".")) and unicodedata.is_normalized("NFC", name)
            and len(name.encode("utf-8")) <= max_bytes)


def _cleaned(text: str) -> str:
    """`text` (NFC) with each run of other characters turned into one '-', no '..', starting with a
    letter or digit and not ending in '-' or '.'; not yet bounded."""
    out: list[str] = []
    for char in unicodedata.normalize("NFC", text):
        if _allowed(char):
            out.append(char)
        elif out[-1:] != ["-"]:
            out.append("-")
    name = "".join(out)
    while ".." in name:
        name = name.replace("..", "-")
    first = next((i for i, char in enumerate(name) if _starts(char)), len(name))
    return name[first:].rstrip("-.")


def clean_name(text: object, fallback: str, max_len: int = 40) -> str:
    """`text` with every run of other characters (separators, spaces, '..') turned into '-',
    trimmed to `max_len` characters and MAX_BYTES; `fallback` when nothing is left."""
    name = _cleaned(str(text or ""))[:max_len]
    while len(name.encode("utf-8")) > MAX_BYTES:
        name = name[:-1]
    name = name.rstrip("-.")
    return name if is_plain_name(name) else fallback


def checked_name(text: object, what: str | Message, max_len: int = 64) -> str:
    """`text` itself (NFC) when it is already a plain, safe name; else UnsafeName.
    `what` names the field, e.g. msg("name.dataset"), so the refusal can be translated."""
    name = unicodedata.normalize("NFC", text) if isinstance(text, str) else ""
    if not name or len(name) > max_len or _cleaned(name) != name:
        raise UnsafeName(msg("name.not_allowed", what=what, text=text, max_len=max_len))
    size = len(name.encode("utf-8"))
    if size > MAX_BYTES:  # only where 3- and 4-byte characters fill max_len
        raise UnsafeName(msg("name.too_long", what=what, text=text, size=size, max_bytes=MAX_BYTES))
    return name


def path_inside(folder: Path, name: str) -> Path:
    """folder / name, refused unless it resolves to a direct child of `folder`
    (a symlinked or crafted name that points elsewhere is caught here too)."""
    folder = Path(folder)
    path = folder / name
    if path.resolve().parent != folder.resolve():
        raise UnsafeName(msg("name.leaves_folder", name=name, folder=str(folder)))
    return path
