"""Loaders: every file type, the LLaMA-Factory folder, column mappings, and what was detected."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from backend.data.checks import check_file
from backend.data.errors import DataError
from backend.data.load import load_file_rows, open_source, read_rows_at

ROWS = [
    {"instruction": "Say hi", "input": "", "output": "Hi"},
    {"instruction": "Add", "input": "2 and 3", "output": "5"},
    {"instruction": "Name a colour", "input": "", "output": "Blue", "system": "Be brief."},
]
EXPECTED_FIRST = [{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "Hi"}]


def _write(tmp_path, kind):
    path = tmp_path / f"rows.{kind}"
    if kind == "json":
        path.write_text(json.dumps(ROWS), encoding="utf-8")
    elif kind == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n\n" for r in ROWS), encoding="utf-8")
    elif kind in ("csv", "tsv"):
        sep = "," if kind == "csv" else "\t"
        lines = [sep.join(["instruction", "input", "output", "system"])]
        lines += [sep.join([r["instruction"], f'"{r["input"]}"' if "," in r["input"] else r["input"], r["output"],
                            r.get("system", "")]) for r in ROWS]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif kind == "parquet":
        pq.write_table(pa.Table.from_pylist([{**r, "system": r.get("system")} for r in ROWS]), path)
    return path


@pytest.mark.parametrize("kind", ["json", "jsonl", "csv", "tsv", "parquet"])
def test_every_file_type_loads_the_same_rows(tmp_path, kind):
    path = _write(tmp_path, kind)
    loaded = load_file_rows(path)
    assert loaded.source.file_type == kind and loaded.source.shape.name == "alpaca"
    assert loaded.total == 3 and loaded.indices == [0, 1, 2]
    assert loaded.rows[0]["messages"] == EXPECTED_FIRST
    assert loaded.rows[1]["messages"][0]["content"] == "Add\n2 and 3"
    assert loaded.rows[2]["messages"][0] == {"role": "system", "content": "Be brief."}


def test_json_lines_in_a_json_file_and_row_lines(tmp_path):
    path = tmp_path / "lines.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    source = open_source(path)
    assert source.file_type == "json"
    rows = read_rows_at(path, [2, 0])
    assert sorted(rows) == [0, 2] and rows[2].line == 3 and rows[2].raw == ROWS[2]


def test_json_array_rows_know_their_line(tmp_path):
    path = tmp_path / "pretty.json"
    path.write_text(json.dumps(ROWS, indent=2), encoding="utf-8")
    rows = read_rows_at(path, [0, 1])
    text = path.read_text(encoding="utf-8").split("\n")
    assert text[rows[1].line - 1].strip() == "{"
    assert '"Add"' in text[rows[1].line]


def test_column_mapping_for_other_names(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text("question,answer,context\nWhat is 2+2?,4,math\n", encoding="utf-8")
    with pytest.raises(DataError, match="--mapping instruction=question,output=answer"):
        load_file_rows(path)
    loaded = load_file_rows(path, {"instruction": "question", "output": "answer", "input": "context"})
    assert loaded.source.shape.origin == "mapping"
    assert loaded.rows[0]["messages"] == [{"role": "user", "content": "What is 2+2?\nmath"},
                                          {"role": "assistant", "content": "4"}]
    with pytest.raises(DataError, match="mapped column"):
        load_file_rows(path, {"instruction": "prompt_text", "output": "answer"})


def test_openai_messages_and_custom_sharegpt_tags(tmp_path):
    path = tmp_path / "chat.jsonl"
    row = {"dialog": [{"speaker": "me", "text": "hi"}, {"speaker": "bot", "text": "hello"}]}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    mapping = {"messages": "dialog", "role_tag": "speaker", "content_tag": "text", "user_tag": "me", "assistant_tag": "bot"}
    loaded = load_file_rows(path, mapping)
    assert loaded.rows[0]["messages"] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def test_llama_factory_folder(tmp_path, shared_data):
    folder = tmp_path / "lf"
    folder.mkdir()
    (folder / "glaive.json").write_bytes((shared_data / "glaive_toolcall_zh_demo.json").read_bytes())
    (folder / "qa.jsonl").write_text(json.dumps({"q": "hi", "a": "hello", "sys": "Be nice."}) + "\n", encoding="utf-8")
    info = {
        "glaive": {"file_name": "glaive.json", "formatting": "sharegpt",
                   "columns": {"messages": "conversations", "tools": "tools"}},
        "qa": {"file_name": "qa.jsonl", "columns": {"prompt": "q", "response": "a", "system": "sys"}},
        "hub_only": {"hf_hub_url": "someone/data"},
        "escape": {"file_name": "../outside.json"},
    }
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    with pytest.raises(DataError, match="--dataset NAME"):
        load_file_rows(folder)
    glaive = check_file(folder, dataset="glaive")
    assert glaive.format == "sharegpt" and glaive.rows == 300 and "dataset_info.json entry 'glaive'" in glaive.detected
    qa = load_file_rows(folder, dataset="qa")
    assert qa.rows[0]["messages"][0] == {"role": "system", "content": "Be nice."}
    assert qa.rows[0]["messages"][1:] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    with pytest.raises(DataError, match="outside the folder"):
        load_file_rows(folder, dataset="escape")


def test_raw_control_characters_in_strings_load_and_are_flagged(tmp_path):
    path = tmp_path / "raw.json"
    path.write_bytes(b'[{"instruction": "a\tb", "output": "bell\x07here"}, {"instruction": "c", "output": "d"}]')
    report = check_file(path)
    assert report.usable_rows == 2
    assert report.check("control_chars").rows == [0]  # the bell; a tab is ordinary whitespace


def test_cli_mapping_argument(tmp_path, capsys):
    from backend.data.cli import main, parse_mapping

    assert parse_mapping(["instruction=question,output=answer", "system=sys"]) == {
        "instruction": "question", "output": "answer", "system": "sys"}
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps({"question": "q", "answer": "a"}) + "\n", encoding="utf-8")
    assert main(["check", str(path), "--mapping", "instruction=question,output=answer", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["usable_rows"] == 1
    assert main(["check", str(path), "--mapping", "instruction"]) == 2
    assert "FIELD=COLUMN" in capsys.readouterr().err
