"""What hiding bitsandbytes saves a run's start (backend/training/unused_libraries.py).

Each try is a fresh interpreter importing what a LoRA run's worker imports before its first step
(torch, transformers' Trainer, peft, datasets), with bitsandbytes installed as it is and hidden as
the worker hides it, alternating; prints the median CPU-seconds (user + system) of each and their ratio.

    .venv/bin/python bench/unused_imports.py [--tries 5]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys

IMPORTS = "import torch, transformers, peft, datasets; from transformers import Trainer"
HIDE = "import sys; sys.modules['bitsandbytes'] = None; "


def cpu_seconds(code: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=5)
    args = parser.parse_args()
    cpu_seconds(IMPORTS)  # the files into the page cache first
    installed, hidden = [], []
    for _ in range(args.tries):
        installed.append(cpu_seconds(IMPORTS))
        hidden.append(cpu_seconds(HIDE + IMPORTS))
    print(json.dumps({"installed_s": round(statistics.median(installed), 2), "hidden_s": round(statistics.median(hidden), 2),
                      "ratio": round(statistics.median(installed) / statistics.median(hidden), 2),
                      "tries": args.tries}))


if __name__ == "__main__":
    main()
