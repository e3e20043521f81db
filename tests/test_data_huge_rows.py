"""A data file with one huge row is read in bounded memory: the row
is skipped unread with a sentence naming it, the others are checked and
trained on. Proven under an address-space limit (prlimit), never by filling
the machine: a 64 MiB line of messages cost ~1 GB parsed, so the check below
only finishes inside 1 GiB when the line is never parsed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MAX_ROW_CHARS = 16 << 20   # backend/data/read.py

REPO = Path(__file__).resolve().parents[1]
LIMIT_BYTES = 1 << 30
TURN = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}])[1:-1]

pytestmark = pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit (util-linux)")


def huge_list(f, size: int) -> None:
    """A JSON list of `size` characters of small chat turns, written in pieces (never held whole)."""
    f.write("[" + TURN)
    piece = (", " + TURN) * 1000
    for _ in range(size // len(piece)):
        f.write(piece)
    f.write("]")


def write_rows(path: Path, good: list[dict], huge_key: str, extra: dict, size: int = 64 << 20,
               array: bool = False) -> Path:
    with path.open("w", encoding="utf-8") as f:
        f.write("[" if array else "")
        for i, row in enumerate(good):
            f.write(("," if array and i else "") + json.dumps(row) + ("" if array else "\n"))
            if i == 0:   # the huge row second: the rows after it are still read
                f.write(("," if array else "") + "{" + "".join(f'"{k}": {json.dumps(v)}, ' for k, v in extra.items()))
                f.write(f'"{huge_key}": ')
                huge_list(f, size)
                f.write("}" + ("" if array else "\n"))
        f.write("]" if array else "")
    return path


def check_limited(path: Path) -> subprocess.CompletedProcess:
    command = ["prlimit", f"--as={LIMIT_BYTES}", sys.executable, "-m", "backend.data", "check", str(path)]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})


INSTRUCTION = [{"messages": [{"role": "user", "content": f"question {i}"},
                             {"role": "assistant", "content": f"answer {i}"}]} for i in range(3)]
PAIRS = [{"prompt": [{"role": "user", "content": f"question {i}"}],
          "chosen": [{"role": "assistant", "content": f"good {i}"}],
          "rejected": [{"role": "assistant", "content": f"bad {i}"}]} for i in range(3)]


@pytest.mark.usefixtures("starts_processes")
@pytest.mark.parametrize("rows, key, extra, shape", [
    (INSTRUCTION, "messages", {}, "messages"),
    (PAIRS, "chosen", {"prompt": [{"role": "user", "content": "q"}], "rejected": [{"role": "assistant", "content": "n"}]},
     "pairwise"),
])
def test_a_64_mib_line_is_skipped_with_its_row_named(tmp_path, rows, key, extra, shape):
    path = write_rows(tmp_path / "data.jsonl", rows, key, extra)
    result = check_limited(path)
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]   # 1: rows to fix
    assert shape in result.stdout.splitlines()[0]
    assert "rows: 4 in the file, 3 usable" in result.stdout
    assert "row 1 holds more than 16 MiB of text" in result.stdout and "(line 2)" in result.stdout


@pytest.mark.usefixtures("starts_processes")
def test_a_huge_element_of_a_json_array_stops_the_file_with_its_row(tmp_path):
    path = write_rows(tmp_path / "data.json", INSTRUCTION, "messages", {}, array=True)
    result = check_limited(path)
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == 2
    assert "row 1 holds more than 16 MiB of text" in result.stderr and "Split that row" in result.stderr


@pytest.mark.usefixtures("starts_processes")
def test_a_huge_csv_line_is_a_sentence(tmp_path):
    path = tmp_path / "data.csv"
    with path.open("w") as f:
        f.write("instruction,output\nq,a\nlong,")
        for _ in range(64):
            f.write("x" * (1 << 20))
        f.write("\nq2,a2\n")
    result = check_limited(path)
    assert "Traceback" not in result.stderr and result.returncode == 2, result.stderr[-2000:]
    assert "row at line 3 holds more than 16 MiB" in result.stderr


def test_the_worker_reads_the_other_rows(tmp_path):
    """The worker's own reader (resolve.load_rows): the huge row is left out, the others train."""
    from backend.data.resolve import load_rows

    path = write_rows(tmp_path / "data.jsonl", INSTRUCTION, "messages", {}, size=MAX_ROW_CHARS + (1 << 20))
    rows, _ = load_rows(path)
    assert [row["messages"][0]["content"] for row in rows] == ["question 0", "question 1", "question 2"]
