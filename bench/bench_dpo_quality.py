"""DPO over the demo SFT run: does preference accuracy rise while the answers stay as good?

For each variant the real worker trains `stage: dpo` on `demo-pairs` over the
SFT run's final/ adapter (`python -m backend.train --recipe demo-tiny --set
stage=dpo ... <the variant's --set>`), then the real Evaluate path scores it
(`python -m backend.evaluate --run RUN --checkpoint final --json`): preference
accuracy on the 51 held-out pairs, and beside the SFT parent on the SFT run's
held-out split (27 rows): exact match, BLEU, answers that end before
max_new_tokens (backend/evaluation/quality_kept.py). The 20 DEMO_PROMPTS are
answered greedily by the parent and the variant too (exact answers, and how
many end).

    .venv/bin/python bench/bench_dpo_quality.py --workspace WS --demo-model DIR \
        --variant "defaults" --variant "lr 1e-4:learning_rate=1e-4" --variant "rpo 1:rpo_alpha=1.0" ...

A variant is NAME or NAME:key=value,key=value. WS/runs/sft is trained first
with the demo-tiny recipe when it is not there. Prints one JSON line per
variant as it ends and a Markdown table at the end (docs/PREFERENCE.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from backend.models.demo_facts import DEMO_PROMPTS  # noqa: E402
from backend.scoring.text_match import same_text  # noqa: E402


def parse_variant(text: str) -> tuple[str, list[str]]:
    name, _, sets = text.partition(":")
    return name, [s for s in sets.split(",") if s]


def worker(ws: Path, run_dir: Path, sets: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    command = [sys.executable, "-m", "backend.train", "--workspace", str(ws), "--recipe", "demo-tiny",
               "--run-dir", str(run_dir), *[a for item in sets for a in ("--set", item)]]
    started = time.monotonic()
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"training {run_dir.name} failed:\n{result.stderr[-3000:]}")
    return time.monotonic() - started


def evaluate(run_dir: Path, max_new_tokens: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    result = subprocess.run([sys.executable, "-m", "backend.evaluate", "--run", str(run_dir), "--checkpoint", "final",
                             "--max-new-tokens", str(max_new_tokens), "--json"],
                            cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def demo_prompts(run_dir: Path, adapter: Path, max_new_tokens: int) -> tuple[int, int]:
    """(exact answers, answers that ended) of `adapter` on the 20 DEMO_PROMPTS."""
    from peft import PeftModel

    from backend.config import RunConfig
    from backend.models.greedy import greedy_answers_ended
    from backend.models.loading import load_model, load_tokenizer, resolve_model_path
    from backend.runs.workspace import Workspace

    config = RunConfig.load(run_dir / "config.yaml")
    base = resolve_model_path(config.model_name_or_path, Workspace.for_run_dir(run_dir).models_dir)
    model = PeftModel.from_pretrained(load_model(base), str(adapter)).eval()
    answers = greedy_answers_ended(model, load_tokenizer(adapter), [[{"role": "user", "content": q}]
                                                                     for q, _ in DEMO_PROMPTS], max_new_tokens)
    exact = sum(same_text(text, ref) for (text, _), (_, ref) in zip(answers, DEMO_PROMPTS))
    return exact, sum(ended for _, ended in answers)


def measure(ws: Path, sft: Path, name: str, sets: list[str], max_new_tokens: int) -> dict:
    run_dir = ws / "runs" / ("dpo-" + "".join(c if c.isalnum() else "-" for c in name))
    seconds = None
    if not (run_dir / "final" / "COMPLETE").is_file():
        seconds = worker(ws, run_dir, ["stage=dpo", "dataset=demo-pairs", f"init_adapter={sft / 'final'}", *sets])
    summary = evaluate(run_dir, max_new_tokens)
    kept, pairs = summary["kept"], summary["results"]["final"]
    parent, child = kept["parent"]["metrics"], kept["checkpoints"]["final"]
    trained = json.loads((run_dir / "summary.json").read_text())
    return {"variant": name, "sets": sets, "steps": trained.get("final_step"), "train_s": seconds,
            "preference_accuracy": pairs["preference_accuracy"], "mean_margin": pairs["mean_margin"],
            "trl_eval_accuracy": trained.get("final_eval_preference_accuracy"),
            "heldout_rows": kept["num_samples"],
            "exact": (parent["exact_match"], child["exact_match"]), "bleu": (parent["bleu"], child["bleu"]),
            "ended": (parent["ended"], child["ended"]), "eval_loss": (parent["eval_loss"], child["eval_loss"]),
            "demo_exact": (demo_prompts(run_dir, sft / "final", max_new_tokens)[0],
                           demo_prompts(run_dir, run_dir / "final", max_new_tokens)[0]),
            "drops": kept.get("drops") or []}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--demo-model", type=Path, help="a built demo model folder to link as models/demo")
    parser.add_argument("--variant", action="append", default=[], help="NAME or NAME:key=value,...")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    args = parser.parse_args()
    ws = args.workspace.resolve()
    (ws / "models").mkdir(parents=True, exist_ok=True)
    if args.demo_model and not (ws / "models" / "demo").exists():
        (ws / "models" / "demo").symlink_to(args.demo_model.resolve(), target_is_directory=True)
    sft = ws / "runs" / "sft"
    if not (sft / "final" / "COMPLETE").is_file():
        print(f"SFT parent: {worker(ws, sft, []):.0f} s", flush=True)
    rows = []
    for text in args.variant or ["defaults"]:
        row = measure(ws, sft, *parse_variant(text), args.max_new_tokens)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("\n| variant | steps | preference accuracy | exact, held-out (SFT -> DPO) | BLEU | ended % | "
          "DEMO_PROMPTS exact | flagged |")
    print("|---|---:|---:|---|---|---|---|---|")
    for r in rows:
        pair = "{:.1f} -> {:.1f}"
        print(f"| {r['variant']} | {r['steps']} | {r['preference_accuracy']:.3f} | "
              f"{round(r['exact'][0] * r['heldout_rows'] / 100)} -> {round(r['exact'][1] * r['heldout_rows'] / 100)}"
              f" / {r['heldout_rows']} | {pair.format(*r['bleu'])} | {pair.format(*r['ended'])} | "
              f"{r['demo_exact'][0]} -> {r['demo_exact'][1]} / 20 | {len(r['drops'])} |")


if __name__ == "__main__":
    main()
