"""Bytes on disk -> a stream of raw records (dicts), one at a time.

Streaming matters: a 1 GB JSON Lines or JSON array file is read in chunks and
each record is handed on and forgotten, so the file is never held in memory
several times over. File-level problems (wrong encoding, invalid JSON in an
array, an empty or truncated file) raise DataError; a record that cannot be
parsed on its own (a bad JSON Lines line, a CSV row with the wrong number of
fields) is yielded with `error` set, so the other rows still get checked.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.data.errors import DataError
from backend.data.text_encoding import detect_encoding, open_text
from backend.messages import msg

CHUNK_CHARS = 1 << 20
# The most text one row (a JSON Lines line, an array element, a CSV line) may hold, in characters. A
# parsed row costs many times its text (a 64 MiB line of messages took ~1 GB), so a larger one is
# skipped unread and reported, never parsed: memory stays bounded whatever the file holds. Above a
# field's own limit (checks/specs.py: 1,000,000 characters) times the fields of a generous row.
MAX_ROW_CHARS = 16 << 20
# Whole-file parse to tell a top-level object from JSON Lines: only below this size (one row's worth).
SNIFF_WHOLE_BYTES = MAX_ROW_CHARS
EXTENSIONS = {
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


@dataclass
class RawRecord:
    index: int  # 0-based row number among the file's records
    line: int | None  # 1-based line where the record starts (text formats)
    value: Any  # the parsed record; None when `error` is set
    error: str | None = None  # why this one record could not be parsed


def file_type(path: Path) -> str:
    """json | jsonl | csv | tsv | parquet, from the extension, else from the content."""
    kind = EXTENSIONS.get(path.suffix.lower())
    if kind:
        return kind
    if path.suffix.lower() == ".txt":  # what LLaMA-Factory reads as pretraining documents, one per line
        raise DataError(path, msg("data.text_file"), msg("data.hint.pretraining"))
    with open(path, "rb") as f:
        head = f.read(4)
    if head == b"PAR1":
        return "parquet"
    raise DataError(
        path,
        msg("data.type_unsupported", suffix=path.suffix or "(no extension)"),
        msg("data.hint.types"),
    )


def iter_records(path: Path, kind: str, encoding: str | None = None) -> Iterator[RawRecord]:
    if kind == "parquet":
        return _iter_parquet(path)
    encoding = encoding or detect_encoding(path)
    if kind in ("csv", "tsv"):
        return _iter_csv(path, encoding, "\t" if kind == "tsv" else ",")
    if kind == "jsonl":
        return _iter_jsonl(path, encoding)
    return _iter_json(path, encoding)


def _first_char(path: Path, encoding: str) -> str:
    with open_text(path, encoding) as f:
        while True:
            chunk = f.read(4096)
            if not chunk:
                return ""
            stripped = chunk.lstrip()
            if stripped:
                return stripped[0]


def _iter_json(path: Path, encoding: str) -> Iterator[RawRecord]:
    first = _first_char(path, encoding)
    if not first:
        raise DataError(path, msg("data.empty"), msg("data.hint.no_rows"))
    if first == "[":
        yield from _iter_json_array(path, encoding)
    elif first == "{":
        _refuse_top_level_object(path, encoding)
        yield from _iter_jsonl(path, encoding)
    else:
        raise DataError(
            path,
            msg("data.bad_start", first=first),
            msg("data.hint.json_shape"),
            line=1,
        )


def _refuse_top_level_object(path: Path, encoding: str) -> None:
    """A .json file holding one object is a mistake (or a dataset_info.json); JSON Lines passes."""
    if path.stat().st_size > SNIFF_WHOLE_BYTES:
        return
    with open_text(path, encoding) as f:
        try:
            value = json.load(f, strict=False)
        except json.JSONDecodeError:
            return  # several objects (JSON Lines) or broken lines: the line reader reports them
    if not isinstance(value, dict):
        return
    if path.name == "dataset_info.json":
        raise DataError(path, msg("data.dataset_info_file"), msg("data.hint.dataset_info_folder"))
    keys = ", ".join(list(value)[:8])
    lists = [k for k, v in value.items() if isinstance(v, list) and v and isinstance(v[0], dict)]
    hint = msg("data.hint.rows_under", key=lists[0]) if lists else msg("data.hint.wrap_rows")
    raise DataError(path, msg("data.top_level_object", keys=keys), hint, line=1)


def row_too_large_message(row: int) -> str:
    return str(msg("data.row_too_large", row=row, limit=f"{MAX_ROW_CHARS >> 20} MiB"))


def bounded_lines(f, limit: int = MAX_ROW_CHARS) -> Iterator[tuple[int, str | None]]:
    """(line number, line) for each line of a text stream, holding at most `limit` characters of it:
    a longer line is read on in chunks and thrown away, and comes out as (number, None)."""
    lineno = 0
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        lineno += 1
        if len(line) > limit and not line.endswith("\n"):
            while (rest := f.readline(CHUNK_CHARS)) and not rest.endswith("\n"):
                pass
            line = None
        yield lineno, line


def _iter_jsonl(path: Path, encoding: str) -> Iterator[RawRecord]:
    index = 0
    last_line = 0
    with open_text(path, encoding) as f:
        for lineno, line in bounded_lines(f):
            last_line = lineno
            if line is None:
                yield RawRecord(index, lineno, None, f"{row_too_large_message(index)} (line {lineno})")
                index += 1
                continue
            if not line.strip():
                continue
            try:
                yield RawRecord(index, lineno, json.loads(line, strict=False))
            except json.JSONDecodeError as e:
                cut = "" if line.endswith("\n") else " (the last line is cut off: the file may be truncated)"
                yield RawRecord(index, lineno, None, f"invalid JSON at line {lineno}, column {e.colno}: {e.msg}{cut}")
            index += 1
    if index == 0:
        what = msg("data.empty") if last_line == 0 else msg("data.blank")
        raise DataError(path, what, msg("data.hint.no_rows"))


class _JsonArrayReader:
    """Decodes the elements of a top-level JSON array from a text stream, chunk by chunk."""

    def __init__(self, path: Path, stream):
        self.path, self.stream = path, stream
        self.buf, self.pos, self.eof = "", 0, False
        # Line of buf[line_pos]: advanced incrementally, so counting lines stays linear.
        self.line, self.line_pos = 1, 0
        # strict=False: raw tabs / control characters inside strings are common in
        # exported data; they load, and the control_chars check reports them.
        self.decoder = json.JSONDecoder(strict=False)

    def more(self) -> bool:
        if self.eof:
            return False
        chunk = self.stream.read(CHUNK_CHARS)
        self.line_at(self.pos)
        self.buf, self.pos, self.line_pos = self.buf[self.pos :] + chunk, 0, 0
        self.eof = not chunk
        return bool(chunk)

    def line_at(self, pos: int) -> int:
        """Line number at `pos` (positions only move forward)."""
        self.line += self.buf.count("\n", self.line_pos, pos)
        self.line_pos = pos
        return self.line

    def where(self, pos: int) -> tuple[int, int]:
        return self.line_at(pos), pos - (self.buf.rfind("\n", 0, pos) + 1) + 1

    def peek(self) -> str:
        """Next non-blank character ('' at the end of the file)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def value(self, row: int) -> tuple[Any, int]:
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                if self._maybe_incomplete(e) and self._room(row) and self.more():
                    continue
                raise self._error(e, row) from None
            if end == len(self.buf) and self.more():
                continue  # a number may go on in the next chunk
            line = self.line_at(self.pos)
            self.pos = end
            return value, line

    def _room(self, row: int) -> bool:
        """True while the element being read is within a row's size; past it, a DataError naming the row (an
        array element cannot be skipped without parsing it, so the file stops here)."""
        if len(self.buf) - self.pos <= MAX_ROW_CHARS:
            return True
        line, column = self.where(self.pos)
        raise DataError(self.path, msg("data.row_too_large", row=row, limit=f"{MAX_ROW_CHARS >> 20} MiB"),
                        msg("data.hint.split_row"), line=line, column=column)

    def _maybe_incomplete(self, e: json.JSONDecodeError) -> bool:
        # Errors caused by the chunk ending lie within a literal's length of its end.
        return e.msg.startswith("Unterminated string") or e.pos >= len(self.buf) - 10

    def _error(self, e: json.JSONDecodeError, row: int) -> DataError:
        line, column = self.where(e.pos)
        rest = self.buf[e.pos :]
        if e.msg.startswith("Unterminated string") or not any(c in rest for c in "]}"):
            return DataError(
                self.path,
                msg("data.truncated_row", row=row),
                msg("data.hint.export_again"),
                line=line,
                column=column,
            )
        return DataError(
            self.path,
            msg("data.invalid_json_row", row=row, error=e.msg),
            msg("data.hint.fix_json"),
            line=line,
            column=column,
        )


def _iter_json_array(path: Path, encoding: str) -> Iterator[RawRecord]:
    with open_text(path, encoding) as stream:
        reader = _JsonArrayReader(path, stream)
        reader.peek()
        reader.pos += 1  # the opening '['
        index = 0
        while True:
            c = reader.peek()
            if c == "]":
                reader.pos += 1
                break
            if not c:
                line, column = reader.where(reader.pos)
                raise DataError(
                    path,
                    msg("data.unclosed_list"),
                    msg("data.hint.export_again"),
                    line=line,
                    column=column,
                )
            if index > 0:
                if c != ",":
                    line, column = reader.where(reader.pos)
                    raise DataError(
                        path,
                        msg("data.expected_comma", row=index - 1, found=c),
                        msg("data.hint.missing_comma"),
                        line=line,
                        column=column,
                    )
                reader.pos += 1
                reader.peek()
            value, line = reader.value(index)
            yield RawRecord(index, line, value)
            index += 1
        trailing = reader.peek()
        if trailing:
            line, column = reader.where(reader.pos)
            raise DataError(
                path, msg("data.trailing_text", text=trailing), msg("data.hint.remove_it"), line=line, column=column
            )
    if index == 0:
        raise DataError(path, msg("data.empty_list"), msg("data.hint.no_rows"))


def _iter_csv(path: Path, encoding: str, delimiter: str) -> Iterator[RawRecord]:
    # One legitimately long field (a whole document) must not stop the reader; one over a row's size does.
    csv.field_size_limit(MAX_ROW_CHARS)
    with open_text(path, encoding, newline="") as f:
        reader = csv.reader(_csv_lines(path, f), delimiter=delimiter, strict=True)
        try:
            header = next(reader, None)
            if not header or not any(h.strip() for h in header):
                raise DataError(path, msg("data.empty"), msg("data.hint.header_row"), line=1)
            index, start = 0, reader.line_num + 1
            for fields in reader:
                if not fields:
                    start = reader.line_num + 1
                    continue
                if len(fields) != len(header):
                    error = (
                        f"row at line {start} has {len(fields)} fields but the header has {len(header)}: "
                        "a comma or line break inside an unquoted field? Put such fields in double quotes"
                    )
                    yield RawRecord(index, start, None, error)
                else:
                    yield RawRecord(index, start, dict(zip(header, fields)))
                index, start = index + 1, reader.line_num + 1
        except csv.Error as e:
            raise DataError(
                path,
                msg("data.csv_unparsable", error=e, line=start),
                msg("data.hint.csv_quotes"),
                line=start,
            ) from None
    if index == 0:
        raise DataError(path, msg("data.header_only"), msg("data.hint.with_rows"))


def _csv_lines(path: Path, f) -> Iterator[str]:
    """The file's lines for csv.reader, none longer than a row may be (a quoted field spanning several
    lines is bounded by csv.field_size_limit)."""
    for lineno, line in bounded_lines(f):
        if line is None:
            raise DataError(path, msg("data.row_too_large", row=f"at line {lineno}", limit=f"{MAX_ROW_CHARS >> 20} MiB"),
                            msg("data.hint.split_row"), line=lineno)
        yield line


def _iter_parquet(path: Path) -> Iterator[RawRecord]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(path, msg("data.parquet_unreadable", error=e), msg("data.hint.parquet_again")) from None
    if parquet.metadata.num_rows == 0:
        raise DataError(path, msg("data.parquet_empty"), msg("data.hint.export_dataset"))
    index = 0
    for batch in parquet.iter_batches(batch_size=1000):
        for value in batch.to_pylist():
            yield RawRecord(index, None, value)
            index += 1
