"""API server benchmark. Not a test: prints medians as Markdown.

For the demo model and a randomly initialised Qwen2.5-0.5B-architecture model
(bench/bench_chat.py builds it from the config numbers), each as a run folder
with two real LoRA checkpoints, served by a real `python -m backend.serve`:

1. tokens/s: a greedy answer of exactly N new tokens (`ignore_eos`) through the
   HTTP API (openai-shaped JSON, client wall time) against `ChatEngine.answer`
   in this process (same prompt, same N), alternating. Goal: API >= 0.9x.
2. switch: latency of a 1-token request whose `model` differs from the last
   one, against one for the same model; the difference is the switch's cost,
   compared with a reload (drop everything, load base +
   PeftModel.from_pretrained, as bench_chat.py times it). The whole request
   (switch + prompt + one token + HTTP) is shown against the reload too.
   Goal: the switch costs under 5% of a reload.
3. batching (demo model): 8 concurrent greedy requests over base and two
   checkpoints, against a server with --max-batch 1 and one with --max-batch 8
   running side by side, alternating rounds: tokens/s of all requests together.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/bench_serve.py [--quick]
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
from pathlib import Path

import httpx
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.chat.engine import ChatEngine  # noqa: E402
from backend.chat.generation import GenerationSettings  # noqa: E402
from backend.chat.targets import ChatTarget  # noqa: E402
from backend.models.demo_facts import DEMO_PROMPTS  # noqa: E402
from backend.models.loading import ensure_demo_model  # noqa: E402
from backend.storage.atomic_files import atomic_write_json  # noqa: E402
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)
from bench.bench_chat import PROMPT, build_adapters, build_qwen_05b, time_reload_switch  # noqa: E402


def make_run(model_dir: Path, run_dir: Path) -> list[Path]:
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"model_name_or_path": str(model_dir), "method": "lora"}))
    atomic_write_json(run_dir / "status.json", {"state": "completed"})
    return build_adapters(model_dir, run_dir)


class Server:
    def __init__(self, run_dir: Path, log: Path, *extra: str):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(torch.get_num_threads())}
        with open(log, "wb") as out:
            self.process = subprocess.Popen([sys.executable, "-m", "backend.serve", "--run", str(run_dir),
                                             "--port", str(self.port), *extra], cwd=REPO, env=env, stdout=out,
                                            stderr=subprocess.STDOUT)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=600)
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited; see {log}")
            try:
                if self.client.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)

    def chat(self, model: str, tokens: int, prompt: str = PROMPT) -> dict:
        body = {"model": model, "messages": [{"role": "user", "content": prompt}], "temperature": 0,
                "max_tokens": tokens, "ignore_eos": True}
        response = self.client.post("/v1/chat/completions", json=body)
        response.raise_for_status()
        return response.json()

    def stop(self) -> None:
        self.client.close()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)


def time_tokens(server: Server, engine: ChatEngine, target: ChatTarget, tokens: int, repeats: int) -> dict:
    settings = GenerationSettings(greedy=True, max_new_tokens=tokens, min_new_tokens=tokens)
    server.chat(target.name, tokens)   # warm-up both paths
    engine.answer(target, PROMPT, settings)
    api, local = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        answer = server.chat(target.name, tokens)
        api.append(answer["usage"]["completion_tokens"] / (time.perf_counter() - start))
        start = time.perf_counter()
        reply = engine.answer(target, PROMPT, settings)
        local.append(reply.new_tokens / (time.perf_counter() - start))
        assert reply.new_tokens == answer["usage"]["completion_tokens"] == tokens
    return {"api": statistics.median(api), "engine": statistics.median(local)}


def time_switch(server: Server, names: list[str], repeats: int) -> dict:
    """1-token requests in the order A B B A A B B ...: after the first, every other request asks for
    another model than the one before (a switch) and the rest for the same one, so both kinds see
    the same machine load."""
    switch, same = [], []
    order = [names[(i + 1) // 2 % 2] for i in range(2 * repeats + 1)]
    server.chat(order[0], 1)
    for previous, name in zip(order, order[1:]):
        start = time.perf_counter()
        server.chat(name, 1)
        (switch if name != previous else same).append(time.perf_counter() - start)
    return {"switch": statistics.median(switch), "same": statistics.median(same)}


def time_concurrent(servers: dict[str, Server], names: list[str], clients: int, tokens: int, rounds: int) -> dict:
    """`clients` requests at once (the names in turn, different prompts), against each server in
    turn, round after round: tokens/s over the round's wall time."""
    from concurrent.futures import ThreadPoolExecutor

    prompts = [p for p, _ in DEMO_PROMPTS]
    jobs = [(names[i % len(names)], prompts[i % len(prompts)]) for i in range(clients)]
    rates: dict[str, list[float]] = {label: [] for label in servers}
    with ThreadPoolExecutor(max_workers=clients) as pool:
        for _ in range(rounds + 1):   # the first round warms up
            for label, server in servers.items():
                start = time.perf_counter()
                answers = list(pool.map(lambda job, s=server: s.chat(job[0], tokens, job[1]), jobs))
                made = sum(a["usage"]["completion_tokens"] for a in answers)
                rates[label].append(made / (time.perf_counter() - start))
    return {label: statistics.median(values[1:]) for label, values in rates.items()}


def bench_batching(model_dir: Path, work: Path, clients: int, tokens: int, rounds: int) -> dict:
    run_dir = work / f"{model_dir.name}-batch-run"
    names = ["base", *(a.name for a in make_run(model_dir, run_dir))]
    servers = {"one at a time": Server(run_dir, work / "batch-1.log", "--max-batch", "1"),
               "batched": Server(run_dir, work / "batch-8.log", "--max-batch", str(clients))}
    try:
        rates = time_concurrent(servers, names, clients, tokens, rounds)
        batches = servers["batched"].client.get("/health").json()["batches"]
    finally:
        for server in servers.values():
            server.stop()
    return {**rates, "batches": batches, "clients": clients, "tokens": tokens, "rounds": rounds}


def bench_model(label: str, model_dir: Path, work: Path, tokens: int, repeats: int) -> dict:
    run_dir = work / f"{model_dir.name}-run"
    adapters = make_run(model_dir, run_dir)
    names = [a.name for a in adapters]
    server = Server(run_dir, work / f"{model_dir.name}-serve.log")
    try:
        engine = ChatEngine()
        target = ChatTarget(model=str(model_dir), checkpoint=str(adapters[0]), kind="lora", run_id=run_dir.name,
                            name=names[0])
        speed = time_tokens(server, engine, target, tokens, repeats)
        engine.unload()
        switch = time_switch(server, names, max(repeats, 7))
    finally:
        server.stop()
    reload = statistics.median(time_reload_switch(model_dir, adapters, 3))
    return {"model": label, "tokens": tokens, **speed, **switch, "reload": reload}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the demo model only")
    parser.add_argument("--models-dir", default=str(user_cache_dir() / "test-models"))
    args = parser.parse_args()
    demo = ensure_demo_model(Path(args.models_dir))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        work = Path(tmp)
        batching = bench_batching(demo, work, 8, 32, 5)
        rows.append(bench_model("demo Qwen2", demo, work, 64, 7))
        if not args.quick:
            big = build_qwen_05b(work / "qwen2.5-0.5b-random", demo)
            rows.append(bench_model("Qwen2.5-0.5B architecture, random weights", big, work, 32, 5))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads (server and engine alike)\n")
    print("| model | tokens/s API | tokens/s ChatEngine | API / engine | 1-token request, other model than the last "
          "| same model | switch cost (difference) | reload base + adapter | switch cost / reload | whole request / reload |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cost = r["switch"] - r["same"]
        print(f"| {r['model']} | {r['api']:.1f} | {r['engine']:.1f} | {r['api'] / r['engine']:.3f} ({r['tokens']} tokens) "
              f"| {r['switch'] * 1000:.1f} ms | {r['same'] * 1000:.1f} ms | {cost * 1000:.1f} ms | {r['reload'] * 1000:.0f} ms "
              f"| {100 * cost / r['reload']:.2f}% | {100 * r['switch'] / r['reload']:.2f}% |")
    print(f"\nBatching, demo model: {batching['clients']} concurrent greedy requests of {batching['tokens']} tokens "
          f"(base and two checkpoints mixed), medians of {batching['rounds']} rounds, alternating servers:\n")
    print("| server | tokens/s (all requests) |\n|---|---|")
    print(f"| --max-batch 1 (one at a time) | {batching['one at a time']:.1f} |")
    print(f"| --max-batch {batching['clients']} | {batching['batched']:.1f} |")
    print(f"\nbatched / one at a time: {batching['batched'] / batching['one at a time']:.2f}x "
          f"({batching['batches']} batched generate calls)")


if __name__ == "__main__":
    main()
