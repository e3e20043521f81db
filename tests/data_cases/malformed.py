"""A corpus of malformed data files, written into a tmp folder by the tests.

Each case: the file name, its bytes, the exit code `check` must give (2: the
file cannot be used at all; 1: it loads but rows have `schema` errors) and
fragments the message must contain (the file-level DataError text for 2, the
schema finding's detail for 1).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    filename: str
    data: bytes
    exit_code: int
    fragments: tuple[str, ...]


def _rows(*rows) -> bytes:
    return json.dumps(list(rows), ensure_ascii=False, indent=1).encode()


GOOD = {"instruction": "Say hi", "input": "", "output": "Hi there"}
GOOD_ZH = {"instruction": "你好，请介绍一下你自己", "input": "", "output": "我是一个人工智能助手。"}


def _parquet(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def cases() -> list[Case]:
    big = "x" * (10 << 20)
    return [
        Case("invalid_json", "bad.json",
             b'[{"instruction": "a", "output": "b"},\n {"instruction": "c" "output": "d"}]', 2,
             ("bad.json", "line 2, column 22", "invalid JSON in row 1", "Expecting ','")),
        Case("truncated_json", "cut.json", b'[{"instruction": "a", "output": "b"},\n {"instruction": "c", "outp', 2,
             ("cut.json", "line 2", "looks truncated")),
        Case("unclosed_list", "open.json", b'[{"instruction": "a", "output": "b"}\n', 2,
             ("before the JSON list is closed",)),
        Case("empty_file", "empty.json", b"", 2, ("empty.json", "the file is empty")),
        Case("blank_file", "blank.jsonl", b"\n\n  \n", 2, ("only blank lines",)),
        Case("empty_list", "none.json", b"[ ]", 2, ("the JSON list is empty",)),
        Case("top_level_object", "obj.json", json.dumps({"version": 1, "data": [GOOD]}, indent=2).encode(), 2,
             ("top level is one JSON object", "under 'data'")),
        # Two bytes that read as one common Chinese character (GB18030) and as two accented capitals
        # (Windows-1252): too little text to tell, so the file is refused with both conversions.
        Case("ambiguous_encoding", "ambiguous.json", _rows(GOOD, {"instruction": "x", "output": "中"}).decode().encode("gb18030"), 2,
             ("not UTF-8", "line 9", "too little text", "iconv -f cp1252 -t UTF-8", "iconv -f gb18030 -t UTF-8")),
        Case("utf8_breaks_late", "late.jsonl",
             (json.dumps(GOOD_ZH, ensure_ascii=False) + "\n").encode() * 20000 + b'{"instruction": "caf\xe9", "output": "x"}\n', 2,
             ("stops being utf-8", "line 20001")),
        Case("all_wrong_types", "types.json", _rows({"instruction": "a", "output": 42}, {"instruction": "b", "output": 7.5}), 2,
             ("none of the 2 rows", "output", "is a number (42)")),
        Case("mixed_shapes", "mixed.jsonl",
             (json.dumps(GOOD) + "\n" + json.dumps({"conversations": [{"from": "human", "value": "hi"}]}) + "\n").encode(), 2,
             ("mixes shapes", "row 1", "alpaca")),
        Case("csv_unclosed_quote", "quote.csv", b'instruction,output\n"a,b\nc,d\n', 2, ("never closed", "line 2")),
        Case("not_objects", "strings.json", b'["a", "b"]', 2, ("row 0 is str", "expected an object")),
        Case("unknown_columns", "qa.json", _rows({"question": "q", "answer": "a"}), 2,
             ("no known shape", "question, answer", "--mapping instruction=question,output=answer")),
        Case("bad_extension", "data.xml", b"<rows/>", 2, ("'.xml' is not supported",)),
        Case("plain_text", "data.txt", b"hello", 2, ("the file is plain text", "pretraining text",
                                                     "The app fine-tunes on rows with answers")),
        Case("broken_parquet", "broken.parquet", b"PAR1 this is not parquet", 2, ("not a readable Parquet file",)),
        Case("jsonl_all_bad", "allbad.jsonl", b"{oops\n{nope\n", 2, ("invalid JSON at line 1",)),
        # Row-level problems: the file loads, the bad rows are reported, the others are checked.
        Case("wrong_types_some_rows", "some.json",
             _rows(GOOD, {"instruction": None, "output": "x"}, {"instruction": {"a": 1}, "output": "y"}, {"instruction": "q", "output": [1]}),
             1, ("instruction is empty (null)", "instruction is an object", "output is a list")),
        Case("jsonl_bad_line", "oneline.jsonl",
             (json.dumps(GOOD) + "\n" + '{"instruction": "a", "output": }\n' + json.dumps(GOOD_ZH) + "\n").encode(), 1,
             ("invalid JSON at line 2, column 32",)),
        Case("jsonl_truncated_last_line", "tail.jsonl", (json.dumps(GOOD) + "\n" + '{"instruction": "a", "out').encode(), 1,
             ("line 2", "may be truncated")),
        Case("csv_unquoted_newline", "nl.csv", b'instruction,input,output\nSay hi,,Hi\nWrite\na poem,,Roses\n', 1,
             ("has 1 fields but the header has 3", "double quotes")),
        Case("giant_field", "giant.jsonl", (json.dumps(GOOD) + "\n" + json.dumps({"instruction": "a", "output": big}) + "\n").encode(), 1,
             ("output holds 10,485,760 characters",)),
        Case("missing_field", "missing.json", _rows(GOOD, {"instruction": "only a question"}), 1, ("output is missing",)),
        Case("sharegpt_bad_role", "roles.json",
             _rows({"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]},
                   {"conversations": [{"from": "human", "value": "hi"}, {"from": "robot", "value": "beep"}]}), 1,
             ("unknown role 'robot'",)),
        Case("no_answer", "noanswer.jsonl",
             (json.dumps({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}) + "\n"
              + json.dumps({"messages": [{"role": "user", "content": "a"}]}) + "\n").encode(), 1,
             ("has no assistant turn",)),
    ]


def readable_encodings() -> list[tuple[str, bytes, str]]:
    """(file name, bytes, expected encoding) of files in other encodings that must load."""
    second = {"instruction": "翻译：早上好", "input": "", "output": "Good morning"}
    text = _rows(GOOD_ZH, second).decode()
    text_jsonl = json.dumps(GOOD_ZH, ensure_ascii=False) + "\n" + json.dumps(second, ensure_ascii=False) + "\n"
    return [
        ("bom.json", b"\xef\xbb\xbf" + text.encode(), "utf-8-sig"),
        ("utf16.json", text.encode("utf-16"), "utf-16"),
        ("utf16le.json", text.encode("utf-16-le"), "utf-16-le"),
        ("utf16be_big.jsonl", (json.dumps(GOOD) + "\n").encode("utf-16-be") * 10000 + text_jsonl.encode("utf-16-be"),
         "utf-16-be"),
        ("gbk.json", text.encode("gb18030"), "gb18030"),
    ]


WESTERN_ROW = {"instruction": "Name a French dessert", "input": "", "output": "crème brûlée"}


def western_encodings() -> list[tuple[str, bytes, str]]:
    """(file name, bytes, text of the last row's output) of Windows-1252 / Latin-1 files: read as cp1252."""
    quotes = {"instruction": "Quote it", "input": "", "output": "“Ça coûte 5 €” – dit-il"}  # cp1252-only bytes
    german = {"instruction": "Übersetze", "input": "", "output": "Größe und Maßstab"}
    return [
        ("cp1252.json", _rows(WESTERN_ROW).decode().encode("cp1252"), "crème brûlée"),
        ("latin1.json", _rows(GOOD, german, WESTERN_ROW).decode().encode("latin-1"), "crème brûlée"),
        ("quotes.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in (GOOD, quotes)).encode("cp1252"),
         quotes["output"]),
        ("latin1.csv", "instruction,input,output\nÜbersetze,,Größe\nName a French dessert,,crème brûlée\n".encode("latin-1"),
         "crème brûlée"),
    ]
