"""Every malformed-file case yields its own clear message: a DataError (exit 2)
for a file that cannot be used, a `schema` finding (exit 1) for bad rows,
never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from data_cases.malformed import cases, readable_encodings, western_encodings

from backend.data.checks import check_file
from backend.data.errors import DataError
from backend.data.load import load_file_rows

CASES = {c.name: c for c in cases()}


def _write(tmp_path, case):
    path = tmp_path / case.filename
    path.write_bytes(case.data)
    return path


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.exit_code == 2])
def test_unusable_file_raises_its_message(tmp_path, name):
    case = CASES[name]
    path = _write(tmp_path, case)
    with pytest.raises(DataError) as info:
        check_file(path)
    message = info.value.message
    assert str(path) in message
    for fragment in case.fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.exit_code == 1])
def test_bad_rows_are_reported_and_the_others_checked(tmp_path, name):
    case = CASES[name]
    report = check_file(_write(tmp_path, case))
    schema = report.check("schema")
    details = " | ".join(map(str, schema.details.values()))
    for fragment in case.fragments:
        assert fragment in details, (fragment, details)
    assert report.exit_code == 1
    assert report.usable_rows == report.rows - schema.count >= 1
    # The rows that load are really there.
    assert len(load_file_rows(tmp_path / case.filename).rows) == report.usable_rows


def test_quoted_newlines_in_csv_load_as_one_field(tmp_path):
    path = tmp_path / "quoted.csv"
    path.write_text('instruction,input,output\n"Write\na poem",,"Roses are red,\nviolets blue"\nSay hi,,Hi\n',
                    encoding="utf-8")
    loaded = load_file_rows(path)
    assert loaded.total == 2 and not loaded.rejected
    assert loaded.rows[0]["messages"][0]["content"] == "Write\na poem"
    assert loaded.rows[0]["messages"][1]["content"] == "Roses are red,\nviolets blue"


@pytest.mark.parametrize("filename,data,encoding", readable_encodings())
def test_other_encodings_are_detected_and_decoded(tmp_path, filename, data, encoding):
    path = tmp_path / filename
    path.write_bytes(data)
    report = check_file(path)
    assert report.encoding == encoding
    rows = load_file_rows(path).rows
    assert report.usable_rows == len(rows) >= 2
    assert rows[-1]["messages"][0]["content"] == "翻译：早上好"


@pytest.mark.parametrize("filename,data,text", western_encodings(), ids=[w[0] for w in western_encodings()])
def test_western_files_are_read_as_cp1252_never_as_chinese(tmp_path, filename, data, text, subprocess_env):
    path = tmp_path / filename
    path.write_bytes(data)
    report = check_file(path)
    assert report.encoding == "cp1252" and report.exit_code == 0
    assert "cp1252 (Windows-1252" in report.detected and any("Windows-1252" in n for n in report.notes)
    assert load_file_rows(path).rows[-1]["messages"][1]["content"] == text
    proc = subprocess.run([sys.executable, "-m", "backend.data", "check", str(path)],
                          capture_output=True, text=True, env=subprocess_env, timeout=120)
    assert proc.returncode == 0 and "cp1252" in proc.stdout.splitlines()[0], proc.stdout + proc.stderr


def test_ambiguous_encoding_is_refused_naming_both_readings(tmp_path):
    case = CASES["ambiguous_encoding"]
    with pytest.raises(DataError) as e:
        check_file(_write(tmp_path, case))
    assert "'中'" in e.value.problem and "'ÖÐ'" in e.value.problem


@pytest.mark.parametrize("name", ["invalid_json", "ambiguous_encoding", "mixed_shapes", "csv_unclosed_quote", "top_level_object"])
def test_cli_exit_2_with_the_message_and_no_traceback(tmp_path, name, subprocess_env):
    case = CASES[name]
    path = _write(tmp_path, case)
    proc = subprocess.run([sys.executable, "-m", "backend.data", "check", str(path), "--json"],
                          capture_output=True, text=True, env=subprocess_env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    payload = json.loads(proc.stdout)
    for fragment in case.fragments:
        assert fragment in proc.stderr and fragment in payload["error"]


def test_cli_exit_1_lists_the_bad_rows(tmp_path, subprocess_env):
    path = _write(tmp_path, CASES["wrong_types_some_rows"])
    proc = subprocess.run([sys.executable, "-m", "backend.data", "check", str(path)],
                          capture_output=True, text=True, env=subprocess_env, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "schema" in proc.stdout and "instruction is empty (null)" in proc.stdout
