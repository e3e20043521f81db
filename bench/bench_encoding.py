"""What deciding a file's encoding by evidence over the whole file costs.

The encoding is now chosen from the whole file (backend/data/encoding_evidence.py)
instead of its first MiB. This measures `detect_encoding` against reading the
same file's records once (`iter_records`: decode + JSON parse, what every
check does anyway), alternating the two, for a UTF-8 file (English and
Chinese rows) and a Windows-1252 file (French rows) of the same size.

    nice -n 10 .venv/bin/python bench/bench_encoding.py --mb 40 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from backend.data.read import iter_records
from backend.data.text_encoding import detect_encoding

ROWS = {
    "utf-8": [{"instruction": "Translate: good morning", "input": "", "output": "早上好，今天天气很好。"},
              {"instruction": "Name a French dessert", "input": "", "output": "crème brûlée"}],
    "cp1252": [{"instruction": "Nommez un dessert français", "input": "", "output": "crème brûlée, très appréciée"},
               {"instruction": "Say hi", "input": "", "output": "Hi there — “hello”"}],
}


def write(folder: Path, encoding: str, megabytes: float) -> Path:
    line = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS[encoding]).encode(encoding)
    path = folder / f"{encoding}.jsonl"
    path.write_bytes(line * int(megabytes * 2**20 / len(line)))
    return path


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for encoding in ROWS:
            path = write(Path(tmp), encoding, args.mb)
            assert detect_encoding(path) == encoding
            detect, read = [], []
            for _ in range(args.repeats):  # alternating, so load changes hit both alike
                detect.append(timed(lambda p=path: detect_encoding(p)))
                read.append(timed(lambda p=path, e=encoding: sum(1 for _ in iter_records(p, "jsonl", e))))
            d, r = statistics.median(detect), statistics.median(read)
            print(f"| {encoding} | {path.stat().st_size / 2**20:.0f} MiB | {d:.2f} s | {r:.2f} s | {d / r:.2f} |")


if __name__ == "__main__":
    main()
