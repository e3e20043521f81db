"""1 against 2 (or N) torch threads for a training step, beside 0-4 busy processes: what
backend/training/threads.py chooses from, measured.

Each case times real LoRA training steps (forward, backward, AdamW) of SmolLM2-135M-Instruct (the
starter; the test suite's converted copy) on a batch of 4 x 128 tokens, in a fresh process with
`torch.set_num_threads(T)`, while L processes spin on the CPU. The thread counts alternate within
each repetition, so the machine's drift falls on both alike. Also prints what choose_threads()
measures under each load (the idle CPUs it sees and the threads it takes).

    .venv/bin/python bench/threads_under_load.py [--loads 0 1 2 3 4] [--reps 3] [--steps 4] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)

STEP_CODE = r"""
import sys, time, torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
threads, steps, model_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(threads)
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
batch = torch.randint(0, 1000, (4, 128))
def step():
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward(); optimizer.step(); optimizer.zero_grad()
step()  # warm-up: allocations and oneDNN's first-call setup
start = time.perf_counter()
for _ in range(steps):
    step()
print(f"{(time.perf_counter() - start) / steps:.4f}")
"""
CHOICE_CODE = "from backend.training.threads import choose_threads; print(choose_threads())"


def spinners(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def seconds_per_step(threads: int, steps: int, model_dir: Path) -> float:
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run([sys.executable, "-c", STEP_CODE, str(threads), str(steps), str(model_dir)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def choice_under_load() -> str:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", CHOICE_CODE], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--model", type=Path, default=user_cache_dir() / "test-models" / "smollm2-135m-instruct")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = []
    for load in args.loads:
        hogs = spinners(load)
        try:
            time.sleep(2)  # the spinners running before anything is timed
            choice = choice_under_load()
            times = {threads: [] for threads in args.threads}
            for _ in range(args.reps):
                for threads in args.threads:
                    times[threads].append(seconds_per_step(threads, args.steps, args.model))
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        medians = {threads: statistics.median(values) for threads, values in times.items()}
        best = min(medians, key=medians.get)
        results.append({"load": load, "median_s_per_step": medians, "all": times, "fastest": best,
                        "choose_threads": choice})
        cells = "  ".join(f"{t} thread(s) {m:.2f} s" for t, m in medians.items())
        print(f"load {load}: {cells}  fastest {best}  chosen: {choice}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
