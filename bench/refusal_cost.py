"""What a refusal costs: the CPU seconds (user + system, the child's rusage) of command lines that
refuse before any model loads, in two checkouts side by side, alternating.

Each case runs in a fresh workspace whose models/demo is the test suite's demo model (so no case
builds it), with the demo-tiny recipe: the refusal is all that is timed.

    git worktree add /tmp/before <commit>
    .venv/bin/python bench/refusal_cost.py --checkout before=/tmp/before --checkout after=. --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)

TRAIN = ["-m", "backend.train", "--recipe", "demo-tiny", "--workspace", "{ws}", "--set"]
CASES = {
    "train: dataset missing": [*TRAIN, "dataset=/no/such/data.jsonl"],
    "train: model folder missing": [*TRAIN, "model_name_or_path=/no/such/model"],
    "train: unknown setting": [*TRAIN, "lora_alpa=8"],
    "train: no such GPU": [*TRAIN, "devices=7"],
    "train: Liger on the CPU": [*TRAIN, "use_liger_kernel=true"],
    "train: wrong data shape": [*TRAIN, "dataset={ws}/questions.jsonl"],
    "data check: file missing": ["-m", "backend.data", "check", "/no/such.json"],
    "evaluate: run missing": ["-m", "backend.evaluate", "--run", "/no/such/run"],
    "export: checkpoint missing": ["-m", "backend.export", "--checkpoint", "/no/such/final", "--out", "x", "--merge"],
    "serve: run missing": ["-m", "backend.serve", "--run", "/no/such/run"],
}


def cpu_seconds(checkout: Path, argv: list[str], workspace: Path) -> tuple[float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, PYTHONPATH=str(checkout), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    args = [a.replace("{ws}", str(workspace)) for a in argv]
    code = subprocess.run([sys.executable, *args], cwd=workspace, env=env, capture_output=True).returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), code


def workspace_for(root: Path, name: str) -> Path:
    workspace = root / name
    (workspace / "models").mkdir(parents=True)
    (workspace / "models" / "demo").symlink_to(user_cache_dir() / "test-models" / "demo", target_is_directory=True)
    (workspace / "questions.jsonl").write_text('{"question": "x"}\n')
    return workspace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", action="append", required=True, help="NAME=PATH of a checkout")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    checkouts = [(name, Path(path).resolve()) for name, _, path in (c.partition("=") for c in args.checkout)]
    root = Path(tempfile.mkdtemp(prefix="refusal-cost-"))
    results = {case: {name: [] for name, _ in checkouts} for case in CASES}
    codes = {}
    for rep in range(args.reps):
        for case, argv in CASES.items():
            for name, path in checkouts if rep % 2 == 0 else list(reversed(checkouts)):
                seconds, code = cpu_seconds(path, argv, workspace_for(root, f"{name}-{rep}-{len(codes)}"))
                results[case][name].append(seconds)
                codes[(case, name, rep)] = code
    names = [name for name, _ in checkouts]
    print("| refusal | " + " | ".join(f"{n} (CPU s, median)" for n in names) + " | exit codes |")
    print("|---|" + "---:|" * len(names) + "---|")
    for case, by_name in results.items():
        cells = " | ".join(f"{statistics.median(by_name[n]):.2f}" for n in names)
        exits = ", ".join(sorted({str(codes[(case, n, r)]) for n in names for r in range(args.reps)}))
        print(f"| {case} | {cells} | {exits} |")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
