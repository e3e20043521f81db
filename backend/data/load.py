"""Open a data file (or a LLaMA-Factory dataset_info.json folder), detect its
type, encoding and shape, and stream canonical rows with their problems.

`iter_rows` yields one SourceRow per record of the file, in order, whether
it converted or not: row-level problems travel with the row (they become the
`schema` check), only a file that cannot be read at all raises DataError.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.data.errors import DataError
from backend.data.pairwise import detect_pair_shape
from backend.data.read import file_type, iter_records
from backend.data.shapes import convert_row, detect_shape, known_shape_of, shape_from_mapping
from backend.data.text_encoding import detect_encoding, encoding_message
from backend.data.turns import SHAREGPT_TAGS, Shape
from backend.data.unsupported import media_columns
from backend.messages import Message, msg

DATASET_INFO = "dataset_info.json"
ROW = "(row)"  # the field of a problem that concerns the whole row
# Rows read to find the file's shape (the first that has one decides it).
SHAPE_SCAN = 1000


@dataclass
class Source:
    path: Path  # the data file that is read
    label: str  # what the user gave: the file, or folder + dataset name
    file_type: str  # json | jsonl | csv | tsv | parquet
    encoding: str | None  # text encoding (None for Parquet)
    shape: Shape
    num_samples: int | None = None  # a dataset_info.json entry's num_samples: the rows a run takes (resolve.py)

    def describe(self) -> str:
        return str(self.describe_message())

    def describe_message(self) -> Message:
        """'json, utf-8: alpaca (instruction, output; detected)': type, encoding and shape, translatable."""
        if not self.encoding:
            return msg("data.detected_no_encoding", file_type=self.file_type, shape=self.shape.describe_message())
        return msg("data.detected", file_type=self.file_type, encoding=encoding_message(self.encoding),
                   shape=self.shape.describe_message())


@dataclass
class SourceRow:
    index: int  # 0-based row number in the file
    line: int | None  # 1-based line where it starts, for text files
    row: dict | None  # canonical {"messages": [...]}, None when a problem blocks it
    problems: list[tuple[str, str]] = field(default_factory=list)  # (field, message)
    flags: set[str] = field(default_factory=set)
    raw: Any = None  # the record as read from the file (for display)


def open_source(path: str | Path, mapping: dict[str, str] | None = None, dataset: str | None = None) -> Source:
    path = Path(path)
    if not path.exists():
        raise DataError(path, msg("data.no_such_path"), msg("data.hint.check_path"))
    if path.is_dir() and (path / "meta.json").is_file() and (path / "data.jsonl").is_file():
        path = path / "data.jsonl"  # a workspace dataset: its train rows
    elif path.is_dir():
        return _open_dataset_info(path, dataset)
    if path.stat().st_size == 0:
        raise DataError(path, msg("data.empty"), msg("data.hint.no_rows"))
    kind = file_type(path)
    encoding = None if kind == "parquet" else detect_encoding(path)
    return Source(path, str(path), kind, encoding, _first_shape(path, kind, encoding, mapping))


def _first_shape(path: Path, kind: str, encoding: str | None, mapping: dict[str, str] | None) -> Shape:
    """The shape of the first row that has one (among the first SHAPE_SCAN rows): rows before it that
    have none (a stray header object, a half-filled pair) are then reported as unusable rows, instead of
    deciding the whole file. With none, the first row's own refusal."""
    refusal = None
    for record in _records(path, kind, encoding):
        try:
            return detect_shape(record.value, str(path), mapping, row=record.index)
        except DataError as error:
            if mapping:   # a mapping names the columns of every row: the first row decides
                raise
            refusal = refusal or error
    raise refusal


def _first_record(path: Path, kind: str, encoding: str | None):
    return next(_records(path, kind, encoding))


def _records(path: Path, kind: str, encoding: str | None) -> Iterator:
    """The file's first SHAPE_SCAN object records; none at all: the first row's refusal."""
    first_error, found = None, False
    for record in iter_records(path, kind, encoding):
        if isinstance(record.value, dict):
            found = True
            yield record
        else:
            first_error = first_error or record
        if record.index >= SHAPE_SCAN:
            break
    if found:
        return
    if first_error.error:
        raise DataError(path, first_error.error, msg("data.hint.no_row_read"), row=first_error.index)
    raise DataError(
        path,
        msg("data.row_not_object", row=first_error.index, kind=type(first_error.value).__name__),
        msg("data.hint.row_object"),
        row=first_error.index,
    )


def _open_dataset_info(folder: Path, dataset: str | None) -> Source:
    info_path = folder / DATASET_INFO
    if not info_path.is_file():
        raise DataError(folder, msg("data.no_dataset_info", name=DATASET_INFO), msg("data.hint.file_or_folder"))
    try:
        info = json.loads(info_path.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(info_path, msg("data.dataset_info_unparsable", error=e), msg("data.hint.fix_dataset_info")) from None
    local = {k: v for k, v in info.items() if isinstance(v, dict) and v.get("file_name")}
    if dataset is None:
        if len(local) != 1:
            names = ", ".join(sorted(local)) or "(none with a local file_name)"
            raise DataError(info_path, msg("data.several_datasets", count=len(local), names=names),
                            msg("data.hint.choose_dataset"))
        dataset = next(iter(local))
    entry = local.get(dataset)
    if entry is None:
        remote = not_local(info_path, dataset, info.get(dataset))
        if remote:
            raise remote
        raise DataError(info_path, msg("data.no_dataset_named", name=dataset),
                        msg("data.hint.choose_one_of", names=", ".join(sorted(local))))
    data_path = _inside(folder, entry["file_name"], info_path)
    if data_path.suffix.lower() == ".txt":  # LLaMA-Factory's `text` loader: one document per line (wiki_demo)
        raise DataError(info_path, msg("data.text_file_entry", name=dataset, file=entry["file_name"]),
                        msg("data.hint.pretraining"))
    num_samples = _num_samples(info_path, dataset, entry)
    kind = file_type(data_path)
    encoding = None if kind == "parquet" else detect_encoding(data_path)
    first = _first_record(data_path, kind, encoding).value
    formatting = entry.get("formatting", "alpaca")
    columns = dict(entry.get("columns") or {})
    mapping = {**columns, **(entry.get("tags") or {})}
    if formatting == "sharegpt":
        mapping.setdefault("messages", "conversations")
    elif formatting != "alpaca":
        raise DataError(info_path, msg("data.formatting", name=dataset, formatting=formatting),
                        msg("data.hint.alpaca_sharegpt"))
    _refuse_untrainable(info_path, dataset, entry, columns, first)
    if entry.get("ranking") or columns.get("kto_tag"):
        source = _preference_entry(folder, dataset, data_path, kind, encoding, first, mapping)
    else:
        mapping = {k: v for k, v in mapping.items() if k not in ("chosen", "rejected", "kto_tag")}
        shape = shape_from_mapping(mapping, first, str(data_path), origin=msg("data.origin.entry", name=dataset))
        source = Source(data_path, f"{folder}:{dataset}", kind, encoding, shape)
    source.num_samples = num_samples
    return source


def _num_samples(info_path: Path, dataset: str, entry: dict) -> int | None:
    """The entry's num_samples: a whole number above 0, or None when it has none."""
    value = entry.get("num_samples")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(info_path, msg("data.num_samples", name=dataset, value=value), msg("data.hint.num_samples"))
    return value


# Where LLaMA-Factory reads an entry without file_name from, in its own order of precedence.
HUBS = {"hf_hub_url": ("Hugging Face hub", "hf download {repo} --repo-type dataset --local-dir {target}"),
        "ms_hub_url": ("ModelScope hub", "modelscope download --dataset {repo} --local_dir {target}"),
        "om_hub_url": ("Modelers hub", "openmind-cli pull {repo} --repo_type dataset --local_dir {target}")}
REMOTE_KEYS = ("script_url", "cloud_file_name")


def not_local(info_path: Path, dataset: str, entry) -> DataError | None:
    """An entry LLaMA-Factory reads from a hub, a loading script or cloud storage: said as such (the
    app reads local files), with how to fetch it, rather than as an unknown name. None for any other."""
    if not isinstance(entry, dict):
        return None
    target = info_path.parent / dataset
    for key, (hub, command) in HUBS.items():
        if isinstance(entry.get(key), str):
            repo = entry[key]
            return DataError(info_path, msg("data.hub_dataset", name=dataset, hub=hub, repo=repo),
                             msg("data.hint.download_dataset", command=command.format(repo=repo, target=target)))
    key = next((k for k in REMOTE_KEYS if entry.get(k)), None)
    if key:
        return DataError(info_path, msg("data.remote_dataset", name=dataset, key=key, value=entry[key]),
                         msg("data.hint.local_file"))
    return None


def _refuse_untrainable(info_path: Path, dataset: str, entry: dict, columns: dict, first: dict) -> None:
    """An entry the app can read but not train on: multimodal, or pretraining documents (a prompt
    column and no response, LLaMA-Factory's `columns: {prompt: text}`)."""
    media = media_columns(columns)
    if media:
        raise DataError(info_path, msg("data.media_entry", name=dataset,
                                       columns=", ".join(f"{k}={columns[k]}" for k in media)),
                        msg("data.hint.text_only"))
    if entry.get("formatting", "alpaca") != "alpaca" or entry.get("ranking") or columns.get("kto_tag"):
        return
    prompt, response = columns.get("prompt", "instruction"), columns.get("response", "output")
    if "response" not in columns and response not in first and prompt in first:
        raise DataError(info_path, msg("data.pretraining_entry", name=dataset, column=prompt),
                        msg("data.hint.pretraining"))


def _preference_entry(folder, dataset, data_path, kind, encoding, first, mapping) -> Source:
    """A `ranking: true` entry (chosen / rejected) or one with a `kto_tag` column (answers labelled
    desirable or not), in alpaca or sharegpt form; the entry's own role / content tags apply."""

    names = {"prompt": "instruction", "query": "input", "response": "output", "kto_tag": "label"}
    wanted = {names.get(k, k): v for k, v in mapping.items() if k not in SHAREGPT_TAGS}
    shape = detect_pair_shape(first, wanted)
    info_path = folder / DATASET_INFO
    if shape is None:
        columns = ", ".join(map(str, first))
        if "label" in wanted:
            raise DataError(info_path, msg("data.kto_columns", name=dataset, columns=columns),
                            msg("data.hint.kto_columns"))
        raise DataError(info_path, msg("data.ranking_columns", name=dataset, columns=columns),
                        msg("data.hint.ranking_columns"))
    shape.tags.update({k: v for k, v in mapping.items() if k in SHAREGPT_TAGS})
    shape.origin = msg("data.origin.entry", name=dataset)
    return Source(data_path, f"{folder}:{dataset}", kind, encoding, shape)


def _inside(folder: Path, name: str, info_path: Path) -> Path:
    """dataset_info.json's file_name, refused when it leaves the folder or is not a file."""
    target = (folder / name).resolve()
    if not target.is_relative_to(folder.resolve()):
        raise DataError(info_path, msg("data.outside_folder", name=name), msg("data.hint.inside_folder"))
    if target.is_dir():
        raise DataError(info_path, msg("data.folder_entry", name=name), msg("data.hint.folder_entry"))
    if not target.is_file():
        raise DataError(info_path, msg("data.not_in_folder", name=name), msg("data.hint.check_name"))
    return target


def iter_rows(source: Source) -> Iterator[SourceRow]:
    shape_kind = {"alpaca": "alpaca", "sharegpt": "conversation", "openai": "conversation"}.get(
        source.shape.name, "preference")
    for record in iter_records(source.path, source.file_type, source.encoding):
        if record.error:
            yield SourceRow(record.index, record.line, None, [(ROW, record.error)])
            continue
        raw = record.value
        if not isinstance(raw, dict):
            kind = "a list" if isinstance(raw, list) else type(raw).__name__
            yield SourceRow(record.index, record.line, None, [(ROW, f"is {kind}, expected an object with fields")], raw=raw)
            continue
        _refuse_mixed(source, raw, record.index, record.line, shape_kind)
        row, problems, flags = convert_row(raw, source.shape)
        yield SourceRow(record.index, record.line, row, list(problems), flags, raw)


def _refuse_mixed(source: Source, raw: dict, index: int, line: int | None, shape_kind: str) -> None:
    if all(c in raw for c in source.shape.required()):
        return
    other = known_shape_of(raw)
    if other and other != shape_kind:
        raise DataError(
            source.path,
            msg("data.mixed_shapes", first=source.shape.name, row=index, other=other, columns=", ".join(map(str, raw))),
            msg("data.hint.split_shapes"),
            row=index,
            line=line,
        )


@dataclass
class Loaded:
    source: Source
    rows: list[dict]  # canonical rows that converted
    indices: list[int]  # their row numbers in the file
    rejected: list[SourceRow]  # rows with problems (not in `rows`)
    total: int  # rows in the file


def load_file_rows(path: str | Path, mapping: dict[str, str] | None = None, dataset: str | None = None) -> Loaded:
    """All usable canonical rows of a file, in memory (for fixes and training)."""
    source = open_source(path, mapping, dataset)
    loaded = Loaded(source, [], [], [], 0)
    for item in iter_rows(source):
        loaded.total += 1
        if item.row is None:
            loaded.rejected.append(item)
        else:
            loaded.rows.append(item.row)
            loaded.indices.append(item.index)
    if not loaded.rows:
        raise no_usable_rows(source, loaded.rejected[0], len(loaded.rejected))
    return loaded


def no_usable_rows(source: Source, first: SourceRow, count: int) -> DataError:
    where, message = first.problems[0]
    return DataError(
        source.path,
        msg("data.no_usable_rows", count=count, problem=problem_text(where, message)),
        msg("data.hint.fix_rows"),
        row=first.index,
        line=first.line,
        field=None if where == ROW else where,
    )


def problem_text(where: str, message: str | Message) -> str | Message:
    """'<field> <problem>' (English through str(); a message id when the problem has one)."""
    if where == ROW:
        return message
    return msg("row.at", where=where, problem=message) if isinstance(message, Message) else f"{where} {message}"


def read_rows_at(path: str | Path, indices, mapping: dict[str, str] | None = None,
                 dataset: str | None = None) -> dict[int, SourceRow]:
    """The given rows (0-based row numbers) with their canonical form and problems,
    for showing the rows behind a check; reads only up to the last one asked for."""
    wanted = set(indices)
    found: dict[int, SourceRow] = {}
    if not wanted:
        return found
    last = max(wanted)
    for item in iter_rows(open_source(path, mapping, dataset)):
        if item.index in wanted:
            found[item.index] = item
        if item.index >= last:
            break
    return found
