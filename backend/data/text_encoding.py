"""Which text encoding a data file uses, and opening it so that a wrong guess
becomes a DataError naming the line, never a UnicodeDecodeError traceback.

Detected: UTF-8 (with or without BOM), UTF-16 (BOM, or the NUL-byte pattern
of ASCII text), and GB18030 / GBK (Chinese exports from Excel on Windows).
Anything else is refused with the encoding to convert from.
"""

from __future__ import annotations

import codecs
import contextlib
from collections.abc import Iterator
from pathlib import Path

from backend.data.errors import DataError

SAMPLE_BYTES = 1 << 20


def detect_encoding(path: Path) -> str:
    with open(path, "rb") as f:
        sample = f.read(SAMPLE_BYTES)
    if sample.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if sample.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    # UTF-16 without a BOM: ASCII characters leave a NUL in every other byte.
    head = sample[:2000]
    if head[1::2].count(0) > len(head) // 4:
        return "utf-16-le"
    if head[0::2].count(0) > len(head) // 4:
        return "utf-16-be"
    try:
        # A multi-byte character may be cut at the end of the sample: decode incrementally.
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=len(sample) < SAMPLE_BYTES)
        return "utf-8"
    except UnicodeDecodeError as e:
        utf8_error = e
    if _looks_chinese(sample):
        return "gb18030"
    raise _not_utf8(path, sample, utf8_error.start)


def _looks_chinese(sample: bytes) -> bool:
    """Decodes as GB18030 and most non-ASCII characters are CJK ideographs or CJK punctuation."""
    try:
        text = codecs.getincrementaldecoder("gb18030")().decode(sample, final=False)
    except UnicodeDecodeError:
        return False
    wide = [c for c in text if ord(c) > 127]
    cjk = sum(1 for c in wide if "\u4e00" <= c <= "\u9fff" or "\u3000" <= c <= "\u303f" or "\uff00" <= c <= "\uffef")
    return bool(wide) and cjk >= 0.8 * len(wide)


def _not_utf8(path: Path, data: bytes, offset: int, base_line: int = 1) -> DataError:
    line = base_line + data.count(b"\n", 0, offset)
    return DataError(
        path,
        f"the file is not UTF-8 text (byte 0x{data[offset]:02x} at byte {offset} cannot be decoded); "
        "it is not UTF-16 or GB18030 either, maybe Latin-1 / Windows-1252",
        "Save it as UTF-8 (Excel: 'CSV UTF-8'; or `iconv -f cp1252 -t utf-8 in > out`)",
        line=line,
    )


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
                error = _not_utf8(path, chunk, at, line)
                error.problem = f"the file stops being {encoding} text at byte {consumed + at}"
                error.hint = "Save the whole file in one encoding, preferably UTF-8"
                return error
            line += chunk.count(b"\n")
            consumed += len(chunk)
    return DataError(path, f"the file cannot be decoded as {encoding}", "Save it as UTF-8")
