"""Benchmark: a page turn in the Data tab on a 100,000-row file.

Generates the same N-row alpaca JSON file as bench/bench_data_check.py (texts
from ../shared/data/alpaca_en_demo.json with a row number added), opens it
with the Data tab's own handler (`ui.tabs.data.open_upload`, demo tokenizer,
cutoff 1024, as a user's upload) and then times the tab's page-turn handler
(`ui.tabs.data.turn_page`) called directly, without a browser. In the same
run it times the full analysis (`open_upload` again: read, check, count
tokens), which is what every page turn did before the Data tab kept its
prepared rows; page turns and full analyses alternate.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/bench_data_pages.py --rows 100000 --turns 5 --full 2

(the demo model is built in .cache/test-models, or read from $FINETUNE_STUDIO_TEST_CACHE).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)
from bench.bench_data_check import make_file  # noqa: E402


def context(root: Path, demo_model: Path):
    from backend.runs.workspace import Workspace
    from ui.context import UIContext
    from ui.i18n import build_i18n, merge_texts
    from ui.shell import TEXT as SHELL_TEXT
    from ui.tabs import data

    workspace = Workspace(root / "workspace").ensure()
    (workspace.models_dir / "demo").symlink_to(demo_model, target_is_directory=True)
    texts = merge_texts(SHELL_TEXT, data.TEXT)
    return UIContext(workspace=workspace, texts=texts, i18n=build_i18n(texts))


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=5, help="page turns timed")
    parser.add_argument("--full", type=int, default=2, help="full analyses timed (alternating with the turns)")
    parser.add_argument("--cutoff", type=int, default=1024)
    args = parser.parse_args()

    from backend.models.loading import ensure_demo_model
    from ui.tabs import data

    demo = ensure_demo_model(Path(os.environ.get("FINETUNE_STUDIO_TEST_CACHE") or user_cache_dir() / "test-models"))
    with tempfile.TemporaryDirectory() as tmp:
        ctx = context(Path(tmp), demo)
        path = Path(tmp) / "bench_alpaca.json"
        make_file(path, args.rows)
        size_mb = path.stat().st_size / 2**20
        open_s, out = timed(lambda: data.open_upload(ctx, "en", str(path), "demo", args.cutoff, None))
        if "state" not in out:
            raise SystemExit(f"the file did not open: {out.get('status')}")
        state = out["state"]
        turns, fulls, page = [], [], 1
        for i in range(max(args.turns, args.full)):
            if i < args.turns:
                page += 1
                seconds, shown = timed(lambda page=page: data.turn_page(ctx, "en", state, page))
                assert shown["page"] == page and shown["preview"].count('class="ft-conv"') == 5, shown.get("status")
                turns.append(seconds)
            if i < args.full:
                fulls.append(timed(lambda: data.open_upload(ctx, "en", str(path), "demo", args.cutoff, None))[0])
    result = {
        "rows": args.rows,
        "file_mb": round(size_mb, 1),
        "open_s": round(open_s, 2),
        "page_turn_s": [round(s, 4) for s in turns],
        "page_turn_median_s": round(statistics.median(turns), 4) if turns else None,
        "full_analysis_s": [round(s, 2) for s in fulls],
        "full_analysis_median_s": round(statistics.median(fulls), 2) if fulls else None,
    }
    if turns and fulls:
        result["ratio_full_over_turn"] = round(statistics.median(fulls) / statistics.median(turns), 1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
