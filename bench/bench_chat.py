"""Chat engine benchmark. Not a test: prints medians as Markdown.

For two models, the demo model and a randomly initialised model with
Qwen2.5-0.5B's architecture (built here from its config numbers, no download):

1. switch: make the other of two LoRA checkpoints ready to answer.
   engine  = ChatEngine with both adapters attached (set_adapter);
   reload  = drop everything, load base + PeftModel.from_pretrained(adapter),
             the way LlamaBoard changes checkpoint. Goal: engine < 5% of reload.
2. tokens/s: greedy answers through ChatEngine.answer (chat template,
   streamer thread, stop criteria) against plain model.generate on the same
   PeftModel, same prompt ids, same generation config. Goal: within 10%.
3. unload: process RSS before / after ChatEngine.unload().
4. columns: the base and four LoRA checkpoints (5 chat columns) answering one
   prompt greedily, all together (ChatEngine.stream_together: one batch, peft
   adapter_names) against one after another (ChatEngine.stream per column, as
   the Chat tab did before). tokens/s = all columns' new tokens / wall time;
   "5th column shows text" = seconds until the last column's first text.
   Alternating, medians; the answers are checked equal.

    nice -n 10 .venv/bin/python bench/bench_chat.py [--quick] [--columns-only]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from backend.chat.engine import ChatEngine, process_memory_mib, weights_bytes  # noqa: E402
from backend.chat.generation import (  # noqa: E402
    GenerationSettings,
    Reply,
    build_messages,
    build_prompt,
    generation_config_for,
)
from backend.chat.targets import ChatTarget  # noqa: E402
from backend.models.loading import ensure_demo_model, load_model, load_tokenizer  # noqa: E402
from backend.runs.files import mark_complete  # noqa: E402
from backend.storage.user_cache import user_cache_dir  # noqa: E402  (the test suite's converted models live there)

# Qwen2.5-0.5B's architecture (config.json of Qwen/Qwen2.5-0.5B-Instruct), 494M parameters.
QWEN25_05B = dict(
    vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
    num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
    rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, hidden_act="silu",
)
PROMPT = "What is the capital of France?"


def build_qwen_05b(folder: Path, demo: Path) -> Path:
    """Random weights in the real shape; the demo tokenizer (its ids fit the vocabulary)."""
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    tokenizer = load_tokenizer(demo)
    torch.manual_seed(0)
    config = Qwen2Config(**QWEN25_05B, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                         architectures=["Qwen2ForCausalLM"])
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_adapters(model_dir: Path, out: Path, count: int = 2) -> list[Path]:
    """Real LoRA adapters (r=16 on every linear layer), lora_B randomised so they differ."""
    from peft import LoraConfig, get_peft_model

    folders = []
    for index in range(count):
        base = load_model(model_dir, dtype=torch.float32)
        model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
        generator = torch.Generator().manual_seed(index)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "lora_B" in name:
                    param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
        folder = out / f"checkpoint-{(index + 1) * 10}"
        model.save_pretrained(folder)
        mark_complete(folder)
        folders.append(folder)
        del model, base
        gc.collect()
    return folders


def time_engine_switch(engine: ChatEngine, targets: list[ChatTarget], repeats: int) -> list[float]:
    engine.prepare(targets, "cpu")   # both adapters attached once, outside the timing
    times = []
    for index in range(repeats):
        target = targets[index % 2]
        start = time.perf_counter()
        with engine._lock:
            loaded = engine._ensure(target, "cpu")
            with engine._activated(loaded, target):
                pass
        times.append(time.perf_counter() - start)
    return times


def time_reload_switch(model_dir: Path, adapters: list[Path], repeats: int) -> list[float]:
    from peft import PeftModel

    times, model = [], None
    for index in range(repeats):
        start = time.perf_counter()
        del model   # LlamaBoard unloads the current model first
        gc.collect()
        base = load_model(model_dir, dtype=torch.float32, device_map="cpu")
        model = PeftModel.from_pretrained(base, str(adapters[index % 2])).eval()
        load_tokenizer(model_dir)
        times.append(time.perf_counter() - start)
        del base
    del model
    gc.collect()
    return times


def time_generation(engine: ChatEngine, model_dir: Path, target: ChatTarget, new_tokens: int, repeats: int) -> dict:
    """Alternate engine and plain runs; both produce the same greedy tokens."""
    from peft import PeftModel

    settings = GenerationSettings(greedy=True, max_new_tokens=new_tokens)
    plain = PeftModel.from_pretrained(load_model(model_dir, dtype=torch.float32), target.checkpoint).eval()
    tokenizer = load_tokenizer(model_dir)
    prompt = build_prompt(tokenizer, build_messages("", [], PROMPT), 10**6, new_tokens)
    config = generation_config_for(plain, tokenizer, settings, new_tokens)
    engine_rates, plain_rates, tokens = [], [], 0
    engine.answer(target, PROMPT, settings)   # warm-up both paths
    with torch.inference_mode():
        plain.generate(prompt.input_ids, attention_mask=torch.ones_like(prompt.input_ids), generation_config=config)
    for _ in range(repeats):
        start = time.perf_counter()   # wall time: chat template, thread and streamer included
        reply = engine.answer(target, PROMPT, settings)
        engine_rates.append(reply.new_tokens / (time.perf_counter() - start))
        start = time.perf_counter()
        with torch.inference_mode():
            out = plain.generate(prompt.input_ids, attention_mask=torch.ones_like(prompt.input_ids),
                                 generation_config=config)
        seconds = time.perf_counter() - start
        tokens = out.shape[1] - prompt.input_ids.shape[1]
        plain_rates.append(tokens / seconds)
        assert tokens == reply.new_tokens, "engine and plain generate produced different token counts"
    del plain
    gc.collect()
    return {"engine": statistics.median(engine_rates), "plain": statistics.median(plain_rates), "tokens": tokens}


def _first_text_and_total(stream, last_column: int) -> tuple[float, float]:
    start, first = time.perf_counter(), None
    for texts in stream:
        if first is None and texts[last_column]:
            first = time.perf_counter() - start
    return first or 0.0, time.perf_counter() - start


def time_columns(engine: ChatEngine, targets: list[ChatTarget], new_tokens: int, repeats: int) -> dict:
    """5 columns answering together vs one after another (alternating runs, same greedy answers)."""
    settings = GenerationSettings(greedy=True, max_new_tokens=new_tokens)
    histories = [[] for _ in targets]

    def one_after_another():
        replies = [Reply() for _ in targets]

        def texts():
            for index, (target, reply) in enumerate(zip(targets, replies)):
                for text in engine.stream(target, [], PROMPT, settings, reply=reply):
                    yield [r.text for r in replies[:index]] + [text] + [""] * (len(targets) - index - 1)
        return replies, texts()

    def together():
        replies = [Reply() for _ in targets]
        return replies, engine.stream_together(targets, histories, PROMPT, settings, replies=replies)

    rates = {"together": [], "sequential": []}
    firsts = {"together": [], "sequential": []}
    answers = {}
    for mode in ("together", "sequential"):   # warm-up both
        _first_text_and_total(dict(together=together, sequential=one_after_another)[mode]()[1], len(targets) - 1)
    for _ in range(repeats):
        for mode, make in (("together", together), ("sequential", one_after_another)):
            replies, stream = make()
            first, seconds = _first_text_and_total(stream, len(targets) - 1)
            rates[mode].append(sum(r.new_tokens for r in replies) / seconds)
            firsts[mode].append(first)
            answers[mode] = [r.text for r in replies]
    assert answers["together"] == answers["sequential"], "together and one-at-a-time greedy answers differ"
    return {mode: {"tps": statistics.median(rates[mode]), "first": statistics.median(firsts[mode])}
            for mode in rates}


def bench_columns(name: str, model_dir: Path, work: Path, new_tokens: int, repeats: int) -> dict:
    adapters = build_adapters(model_dir, work / f"{name}-columns", count=4)
    targets = [ChatTarget(model=str(model_dir))] + [
        ChatTarget(model=str(model_dir), checkpoint=str(a), kind="lora", run_id="bench", name=a.name) for a in adapters]
    engine = ChatEngine()
    engine.prepare(targets, "cpu")
    result = time_columns(engine, targets, new_tokens, repeats)
    engine.unload("cpu")
    params = weights_bytes(model_dir, torch.float32) // 4
    return {"model": f"{name} ({params / 1e6:.1f}M params)", "tokens": new_tokens, **result}


def print_columns(r: dict) -> None:
    t, q = r["together"], r["sequential"]
    print(f"| {r['model']} | {r['tokens']} | {t['tps']:.1f} | {q['tps']:.1f} | {t['tps'] / q['tps']:.2f}x | "
          f"{t['first']:.2f} s | {q['first']:.2f} s |", flush=True)


def bench_model(name: str, model_dir: Path, work: Path, switch_repeats: int, reload_repeats: int,
                new_tokens: int, gen_repeats: int) -> dict:
    adapters = build_adapters(model_dir, work / f"{name}-run")
    targets = [ChatTarget(model=str(model_dir), checkpoint=str(a), kind="lora", run_id="bench", name=a.name)
               for a in adapters]
    engine = ChatEngine()
    switch = statistics.median(time_engine_switch(engine, targets, switch_repeats))
    generation = time_generation(engine, model_dir, targets[0], new_tokens, gen_repeats)
    before = process_memory_mib("cpu")["rss_mib"]
    report = engine.unload("cpu")
    reload = statistics.median(time_reload_switch(model_dir, adapters, reload_repeats))
    params = weights_bytes(model_dir, torch.float32) // 4   # fp32: 4 bytes per parameter
    return {"model": f"{name} ({params / 1e6:.1f}M params)", "switch_engine_s": switch, "switch_reload_s": reload,
            "switch_ratio": switch / reload, "tps_engine": generation["engine"], "tps_plain": generation["plain"],
            "tokens": generation["tokens"], "rss_loaded": before, "rss_unloaded": report["after"]["rss_mib"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the demo model only, fewer repeats")
    parser.add_argument("--columns-only", action="store_true", help="only the 5-column measurement")
    parser.add_argument("--models-dir", default=str(user_cache_dir() / "test-models"))
    args = parser.parse_args()
    demo = ensure_demo_model(Path(args.models_dir))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-chat-") as tmp:
        work = Path(tmp)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
        print("| model (5 columns: base + 4 LoRA) | new tokens per column | tokens/s together | tokens/s one after "
              "another | ratio | 5th column shows text: together | one after another |")
        print("|---|---|---|---|---|---|---|", flush=True)
        print_columns(bench_columns("demo Qwen2", demo, work, 64, 5 if args.quick else 7))
        if not args.quick:
            big = build_qwen_05b(work / "qwen2.5-0.5b-random", demo)
            print_columns(bench_columns("Qwen2.5-0.5B architecture, random weights", big, work, 32, 3))
        if args.columns_only:
            return
        rows.append(bench_model("demo Qwen2", demo, work, 200, 5 if args.quick else 10, 64, 5 if args.quick else 11))
        if not args.quick:
            rows.append(bench_model("Qwen2.5-0.5B architecture, random weights", big, work, 50, 5, 32, 5))
    print("\n| model | switch: engine | switch: reload base + adapter | ratio | tokens/s engine | tokens/s plain generate | engine / plain | RSS loaded → after unload |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['switch_engine_s'] * 1000:.2f} ms | {r['switch_reload_s'] * 1000:.0f} ms | "
              f"{100 * r['switch_ratio']:.3f}% | {r['tps_engine']:.1f} | {r['tps_plain']:.1f} | "
              f"{r['tps_engine'] / r['tps_plain']:.3f} ({r['tokens']} tokens) | "
              f"{r['rss_loaded']:.0f} → {r['rss_unloaded']:.0f} MiB |")


if __name__ == "__main__":
    main()
