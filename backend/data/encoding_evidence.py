"""Evidence for the encoding of a file that is not UTF-8, gathered over the
whole file in one streaming pass (1 MiB chunks, C-speed codecs).

GB18030 and Windows-1252 both decode almost any bytes, so "it decodes" proves
nothing. What separates them is whether the text is plausible:

* Chinese: GB18030 yields characters of GB2312, the 6,763 common ones. Western
  text misread as GB18030 pairs an accented byte with the ASCII letter after
  it ("crème" -> "cr鑝e"), which lands outside GB2312 (its second byte is
  below 0xA1).
* Western: Windows-1252 yields letters or common punctuation, in short runs
  inside words ("crème", "ação"). Chinese misread as Windows-1252 gives long
  runs of symbols and accented capitals ("你好" -> "ÄãºÃ").
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20
PLAUSIBLE = 0.9  # share of the non-ASCII characters that must read as real text
WESTERN_RUN = 3  # longest run of non-ASCII characters inside a Western word
WESTERN_PUNCT = set("\u00a0‘’‚“”„–—…•€£¥©®°±«»¡¿·×÷§¶ªº¹²³¼½¾´¨¸¦¯¤¢µ†‡‰‹›™")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_LETTER = re.compile(r"[^\W\d_]")  # a letter in any script (str.isalpha, as a regex)
_DROP_PUNCT = {ord(c): None for c in WESTERN_PUNCT}
_LONG_RUN = re.compile(f"[^\\0]{{{WESTERN_RUN + 1},}}")  # a run too long for a Western word


@dataclass
class Evidence:
    utf8_ok: bool = True
    utf8_before_error: bool = False  # valid multi-byte UTF-8 seen before the first bad byte
    gb_ok: bool = True
    gb_common: int = 0  # GB2312 characters in the GB18030 reading
    gb_non_ascii: int = 0
    cp_ok: bool = True
    cp_words: int = 0  # letters / punctuation in short runs, in the Windows-1252 reading
    non_ascii: int = 0  # non-ASCII characters in the Windows-1252 reading (= non-ASCII bytes)
    first_non_ascii_line: int | None = None
    gb_sample: str = ""
    cp_sample: str = ""

    @property
    def gb_plausible(self) -> bool:
        return self.gb_ok and self.gb_non_ascii > 0 and self.gb_common >= PLAUSIBLE * self.gb_non_ascii

    @property
    def cp_plausible(self) -> bool:
        return self.cp_ok and self.non_ascii > 0 and self.cp_words >= PLAUSIBLE * self.non_ascii


def gather(path: Path) -> Evidence:
    """UTF-8 first (one C-speed decode of the file); the GB18030 / Windows-1252
    readings only for a file that is not UTF-8 (a second pass)."""
    ev = Evidence()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    lines = 1
    for chunk, final in _chunks(path):
        if ev.first_non_ascii_line is None and not chunk.isascii():
            first = next(i for i, b in enumerate(chunk) if b > 127)
            ev.first_non_ascii_line = lines + chunk.count(b"\n", 0, first)
        lines += chunk.count(b"\n")
        _read_utf8(ev, utf8, chunk, final)
        if not ev.utf8_ok:
            break
    if ev.utf8_ok or ev.utf8_before_error:
        return ev
    gb = codecs.getincrementaldecoder("gb18030")()
    cp = codecs.getincrementaldecoder("cp1252")()
    for chunk, final in _chunks(path):
        if ev.gb_ok:
            ev.gb_ok = _read_gb(ev, gb, chunk, final)
        if ev.cp_ok:
            ev.cp_ok = _read_cp(ev, cp, chunk, final)
        if not (ev.gb_ok or ev.cp_ok):
            break
    return ev


def _chunks(path: Path):
    """(chunk, final) over the file; the last is (b"", True) so decoders flush."""
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk, False
    yield b"", True


def _read_utf8(ev: Evidence, decoder, chunk: bytes, final: bool) -> None:
    try:
        text = decoder.decode(chunk, final)
    except UnicodeDecodeError as e:
        ev.utf8_ok = False
        ev.utf8_before_error = ev.utf8_before_error or not chunk[: e.start].isascii()
        return
    ev.utf8_before_error = ev.utf8_before_error or not text.isascii()


def _read_gb(ev: Evidence, decoder, chunk: bytes, final: bool) -> bool:
    try:
        text = decoder.decode(chunk, final)
    except UnicodeDecodeError:
        return False
    wide = "".join(_NON_ASCII.findall(text))
    ev.gb_non_ascii += len(wide)
    ev.gb_common += len(wide.encode("gb2312", errors="ignore")) // 2  # 2 bytes per GB2312 character
    ev.gb_sample = ev.gb_sample or wide[:12]
    return True


def _read_cp(ev: Evidence, decoder, chunk: bytes, final: bool) -> bool:
    try:
        text = decoder.decode(chunk, final)
    except UnicodeDecodeError:  # one of the five bytes Windows-1252 leaves undefined
        return False
    runs = _NON_ASCII.findall(text)
    if not runs:
        return True
    # One string of the runs (NUL between them) keeps the counting at C speed.
    joined = "\0".join(runs)
    everything = joined.replace("\0", "")
    ev.non_ascii += len(everything)
    ev.cp_words += _words(everything) - _words("".join(_LONG_RUN.findall(joined)))
    ev.cp_sample = ev.cp_sample or runs[0]
    return True


def _words(text: str) -> int:
    """Letters and common Western punctuation in `text`."""
    return len(text) - len(_LETTER.sub("", text).translate(_DROP_PUNCT))
