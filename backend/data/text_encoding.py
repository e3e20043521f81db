"""Which text encoding a data file uses, and opening it so that a wrong guess
becomes a DataError naming the line, never a UnicodeDecodeError traceback.

Detected: UTF-8 (with or without BOM), UTF-16 (BOM, or the NUL-byte pattern
of ASCII text), and, for files that are not UTF-8, GB18030 (Chinese exports
from Excel on Windows) or Windows-1252 (Western European; Latin-1 text reads
the same). Both of the last two decode almost any bytes, so the choice is made
by evidence over the whole file (`backend.data.encoding_evidence`): GB18030
only when it yields common Chinese characters, Windows-1252 only when it
yields accented letters inside words. When both or neither read plausibly the
file is refused with the `iconv` command that converts it.
"""

from __future__ import annotations

import codecs
import contextlib
from collections.abc import Iterator
from pathlib import Path

from backend.data.encoding_evidence import Evidence, gather
from backend.data.errors import DataError
from backend.messages import Message, msg

SAMPLE_BYTES = 1 << 20
# What the user sees next to the encoding name in the report and the Data tab.
DESCRIPTIONS = {"utf-8-sig": "data.encoding.utf8_sig", "gb18030": "data.encoding.gb18030",
                "cp1252": "data.encoding.cp1252"}


def encoding_message(encoding: str) -> Message | str:
    """'cp1252 (Windows-1252, Western European ...)', translatable; a plain encoding name as it is."""
    if encoding in DESCRIPTIONS:
        return msg("data.encoding_described", encoding=encoding, description=msg(DESCRIPTIONS[encoding]))
    return encoding


def describe_encoding(encoding: str) -> str:
    """encoding_message in English, for the report's notes."""
    return str(encoding_message(encoding))


def detect_encoding(path: Path) -> str:
    with open(path, "rb") as f:
        head = f.read(4096)
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    # UTF-16 without a BOM: ASCII characters leave a NUL in every other byte.
    head = head[:2000]
    if head[1::2].count(0) > len(head) // 4:
        return "utf-16-le"
    if head[0::2].count(0) > len(head) // 4:
        return "utf-16-be"
    evidence = gather(path)
    if evidence.utf8_ok or evidence.utf8_before_error:
        # Valid UTF-8 characters before a bad byte: a UTF-8 file broken later;
        # `open_text` names the line where it stops being UTF-8.
        return "utf-8"
    chinese, western = evidence.gb_plausible, evidence.cp_plausible
    if chinese and not western:
        return "gb18030"
    if western and not chinese:
        return "cp1252"
    raise _undecided(path, evidence, ambiguous=chinese and western)


def _undecided(path: Path, ev: Evidence, ambiguous: bool) -> DataError:
    convert = "`iconv -f cp1252 -t UTF-8 in > out` (Western European) or `iconv -f gb18030 -t UTF-8 in > out` (Chinese)"
    problem = (msg("data.encoding_ambiguous", count=ev.non_ascii, gb=ev.gb_sample, cp=ev.cp_sample) if ambiguous
               else msg("data.encoding_unknown"))
    return DataError(path, problem, msg("data.hint.convert", convert=convert), line=ev.first_non_ascii_line)


@contextlib.contextmanager
def open_text(path: Path, encoding: str, newline: str | None = None) -> Iterator:
    """Open for reading; a decoding failure anywhere inside the block becomes a DataError."""
    with open(path, encoding=encoding, newline=newline) as f:
        try:
            yield f
        except UnicodeDecodeError:
            raise _locate_decode_error(path, encoding) from None


def _locate_decode_error(path: Path, encoding: str) -> DataError:
    decoder = codecs.getincrementaldecoder(encoding)()
    line, consumed = 1, 0
    with open(path, "rb") as f:
        while chunk := f.read(SAMPLE_BYTES):
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as e:
                at = max(0, min(e.start, len(chunk) - 1))
                return DataError(path, msg("data.stops_being", encoding=encoding, offset=consumed + at),
                                 msg("data.hint.one_encoding"), line=line + chunk.count(b"\n", 0, at))
            line += chunk.count(b"\n")
            consumed += len(chunk)
    return DataError(path, msg("data.cannot_decode", encoding=encoding), msg("data.hint.save_utf8"))
