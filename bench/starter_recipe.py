"""Which recipe teaches the starter model a new identity without forgetting?

Each variant trains the real worker (`python -m backend.train`) on the
starter defaults (SmolLM2-135M-Instruct, the identity dataset) with its own
`--set` overrides, timed from launch to exit; then the base and the run's
final adapter answer the held-out prompts greedily (backend/evaluation/heldout.py):
identity named, the base's right general answers kept, answers that end.

    .venv/bin/python bench/starter_recipe.py --models-dir DIR \
        --variant "default" --variant "lr-5e-4:learning_rate=5e-4,replay=off" ...

A variant is NAME or NAME:key=value,key=value. Prints one JSON line per
variant and a Markdown table at the end (docs/DEMO.md holds the results).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from backend.config import RunConfig  # noqa: E402
from backend.evaluation.heldout import held_out_report  # noqa: E402
from backend.models.loading import load_model, load_tokenizer, resolve_model_path  # noqa: E402
from backend.runs.workspace import Workspace  # noqa: E402


def parse_variant(text: str) -> tuple[str, list[str]]:
    """'NAME:a=1,b=x,y' -> (NAME, ['a=1', 'b=x,y']): a part without '=' continues the list before it."""
    name, _, sets = text.partition(":")
    items: list[str] = []
    for part in (p for p in sets.split(",") if p):
        if "=" in part or not items:
            items.append(part)
        else:
            items[-1] += "," + part
    return name, items


def train(ws: Workspace, name: str, sets: list[str], threads: int) -> tuple[Path, float, int]:
    config_file = ws.root / "starter.yaml"
    RunConfig().save(config_file)
    run_dir = ws.runs_dir / name
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS=str(threads))
    command = [sys.executable, "-m", "backend.train", "--config", str(config_file), "--run-dir", str(run_dir),
               "--workspace", str(ws.root), *[a for item in sets for a in ("--set", item)]]
    started = time.monotonic()
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        print(result.stderr[-3000:], file=sys.stderr)
    return run_dir, seconds, result.returncode


def score(base_path: str, adapter: Path | None, name: str, base_right, max_new_tokens: int):
    import torch
    from peft import PeftModel

    tokenizer = load_tokenizer(adapter or base_path)
    model = load_model(base_path, dtype=torch.float32)
    if adapter is not None:
        model = PeftModel.from_pretrained(model, str(adapter))
    model.eval()
    return held_out_report(model, tokenizer, name, base_right, max_new_tokens)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models-dir", required=True, help="a models folder holding (or to hold) the converted starter")
    parser.add_argument("--variant", action="append", default=[], help="NAME or NAME:key=value,...")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--show-answers", action="store_true")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    args = parser.parse_args()
    config = RunConfig()
    with tempfile.TemporaryDirectory() as scratch:
        ws = Workspace(Path(scratch) / "workspace").ensure()
        models = Path(args.models_dir).resolve()
        base_path = resolve_model_path(config.model_name_or_path, models)
        (ws.models_dir / config.model_name_or_path).symlink_to(base_path, target_is_directory=True)
        base = score(base_path, None, config.identity_name, None, args.max_new_tokens)
        print(json.dumps({"variant": "base", **base.as_dict()}), flush=True)
        if args.show_answers:
            for answer in base.answers:
                print(f"  {answer.prompt!r} -> {answer.text!r}{'' if answer.ended else ' [no end]'}")
        rows = [("base (no training)", "", None, base.identity, None, base.ended)]
        for text in args.variant or ["default"]:
            name, sets = parse_variant(text)
            run_dir, seconds, code = train(ws, name, sets, args.threads)
            if code != 0:
                print(json.dumps({"variant": name, "failed": code}), flush=True)
                continue
            report = score(base_path, run_dir / "final", config.identity_name, base.general_right,
                           args.max_new_tokens)
            summary = json.loads((run_dir / "summary.json").read_text())
            line = {"variant": name, "sets": sets, "seconds": round(seconds, 1), "steps": summary.get("global_step"),
                    **report.as_dict()}
            print(json.dumps(line), flush=True)
            if args.show_answers:
                for answer in report.answers:
                    print(f"  {answer.prompt!r} -> {answer.text!r}{'' if answer.ended else ' [no end]'}")
            rows.append((name, " ".join(sets), seconds, report.identity, report.kept, report.ended))
    print("\n| variant | settings | run s | identity named | general kept | ended with EOS |")
    print("|---|---|---:|---:|---:|---:|")
    for name, sets, seconds, identity, kept, ended in rows:
        kept_text = "-" if kept is None else f"{kept:.0%}"
        seconds_text = "-" if seconds is None else f"{seconds:.0f}"
        print(f"| {name} | {sets or '-'} | {seconds_text} | {identity:.0%} | {kept_text} | {ended:.0%} |")


if __name__ == "__main__":
    main()
