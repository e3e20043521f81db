"""Benchmark: the full data check vs. tokenising the same texts alone.

Generates an N-row alpaca JSON file (default 100,000 rows, texts taken from
../shared/data/alpaca_en_demo.json with a row number added so rows differ),
then in one process:
  1. `check_file` with the demo tokenizer: load + every check + token lengths
     through the chat template (the whole `python -m backend.data check`);
  2. the baseline: the templated strings of the same rows, rendered beforehand
     (not timed), tokenised alone in batches of 1,000 with the same fast tokenizer.
Prints both times, the ratio (goal: under 2) and the peak RSS growth of step 1.

    nice -n 10 .venv/bin/python bench/bench_data_check.py --rows 100000
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.data.checks import check_file  # noqa: E402
from backend.data.load import load_file_rows  # noqa: E402
from backend.models.chat_templates import render  # noqa: E402
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)


def make_file(path: Path, rows: int) -> None:
    base = json.loads((REPO.parent / "shared" / "data" / "alpaca_en_demo.json").read_text(encoding="utf-8"))
    # Written row by row: the process never holds the whole file (its peak memory is measured).
    with open(path, "w", encoding="utf-8") as f:
        f.write("[\n")
        for i in range(rows):
            r = base[i % len(base)]
            row = {"instruction": f"{r['instruction']} (#{i})", "input": r["input"], "output": r["output"]}
            f.write(("," if i else "") + json.dumps(row, ensure_ascii=False) + "\n")
        f.write("]\n")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def current_rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--model", default=None, help="tokenizer folder (default: build / reuse the demo model)")
    parser.add_argument("--cutoff", type=int, default=1024)
    args = parser.parse_args()

    from transformers import AutoTokenizer

    model = args.model
    if model is None:
        from backend.models.loading import ensure_demo_model

        model = str(ensure_demo_model(user_cache_dir() / "test-models"))
    tokenizer = AutoTokenizer.from_pretrained(model)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench_alpaca.json"
        make_file(path, args.rows)
        size_mb = path.stat().st_size / 2**20

        rss_before, peak_before = current_rss_mb(), peak_rss_mb()
        start = time.perf_counter()
        report = check_file(path, tokenizer=tokenizer, model="demo", cutoff_len=args.cutoff)
        check_s = time.perf_counter() - start
        # Growth of the high-water mark over the RSS before the check (a lower bound if
        # an earlier peak was higher, which the printed peak_before shows).
        check_peak = peak_rss_mb() - rss_before

        texts = [render(tokenizer, r["messages"]) for r in load_file_rows(path).rows]
        start = time.perf_counter()
        tokens = 0
        for i in range(0, len(texts), 1000):
            enc = tokenizer(texts[i : i + 1000], add_special_tokens=False, return_attention_mask=False)
            tokens += sum(len(ids) for ids in enc["input_ids"])
        tokenize_s = time.perf_counter() - start

    stats = report.token_lengths
    # Same strings, same tokenizer: the check counted the same tokens (mean is rounded to 0.01).
    assert abs(stats.mean * stats.count - tokens) <= 0.01 * stats.count, (stats.mean * stats.count, tokens)
    result = {
        "rows": args.rows,
        "file_mb": round(size_mb, 1),
        "tokens": tokens,
        "check_s": round(check_s, 2),
        "tokenize_only_s": round(tokenize_s, 2),
        "ratio": round(check_s / tokenize_s, 2),
        "rss_before_check_mb": round(rss_before, 1),
        "peak_rss_before_check_mb": round(peak_before, 1),
        "check_peak_rss_growth_mb": round(check_peak, 1),
        "token_mean": report.token_lengths.mean,
        "findings": {c.id: c.count for c in report.checks if c.count},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
