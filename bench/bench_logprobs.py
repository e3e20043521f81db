"""Scoring prompts through the API server: lm-eval's loglikelihood request
(`echo`, `max_tokens: 1`, `logprobs: 1`, `temperature: 0`) for 32 prompts, sent
as 32 requests of one prompt (lm-eval's --batch_size 1, the baseline), as 4
requests of 8 and as 1 request of 32, alternating in rounds against one real
`python -m backend.serve` on SmolLM2-135M-Instruct (real weights, one real
LoRA adapter built as bench_chat.py builds them). Prints medians as Markdown;
every way must return the same log-probabilities.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/bench_logprobs.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.models.demo_facts import CAPITALS  # noqa: E402
from backend.models.offline import ensure_offline_model  # noqa: E402
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)
from bench.bench_serve import Server, make_run  # noqa: E402

PROMPTS = [f"Question: which city is the capital of {country}? Think of its history, its rivers and its people. "
           f"Answer: {capital}" for country, capital, _, _ in CAPITALS] * 2
PROMPTS = PROMPTS[:32]


def score(server: Server, prompts: list[str], per_request: int) -> tuple[float, list]:
    start = time.perf_counter()
    logprobs = []
    for first in range(0, len(prompts), per_request):
        body = {"model": "checkpoint-10", "prompt": prompts[first:first + per_request], "echo": True,
                "max_tokens": 1, "logprobs": 1, "temperature": 0}
        response = server.client.post("/v1/completions", json=body)
        response.raise_for_status()
        logprobs += [choice["logprobs"]["token_logprobs"] for choice in response.json()["choices"]]
    return time.perf_counter() - start, logprobs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    model_dir = ensure_offline_model("smollm2-135m-instruct", user_cache_dir() / "test-models")
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = Path(scratch) / "run"
        make_run(model_dir, run_dir)
        server = Server(run_dir, Path(scratch) / "serve.log")
        try:
            ways = (1, 8, 32)
            seconds = {way: [] for way in ways}
            reference = score(server, PROMPTS, 1)[1]   # warm-up, and what every way must return
            for _ in range(args.rounds):
                for way in ways:
                    took, logprobs = score(server, PROMPTS, way)
                    seconds[way].append(took)
                    worst = max(abs(a - b) for row, other in zip(logprobs, reference)
                                for a, b in zip(row[1:], other[1:]))
                    assert worst < 1e-3, (way, worst)
        finally:
            server.stop()
    tokens = sum(len(row) for row in reference)
    print(f"{len(PROMPTS)} prompts, {tokens} tokens scored, {args.rounds} rounds\n")
    print("| prompts per request | requests | median s | prompts/s | vs 1 per request |")
    print("|---|---|---|---|---|")
    base = statistics.median(seconds[1])
    for way in ways:
        median = statistics.median(seconds[way])
        print(f"| {way} | {len(PROMPTS) // way} | {median:.2f} | {len(PROMPTS) / median:.1f} | {base / median:.2f}x |")


if __name__ == "__main__":
    main()
