"""Exported GGUF files as Chat columns: offered next to the checkpoint they were exported
from, answered by real llama.cpp (the session's one export, tests/conftest.py) with the run's
training template, greedily as the argmax of the logits, side by side with the adapter and the
base in one stream_together call, and through the Chat tab's handlers."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from backend.chat.catalog import catalog, choice_label, header
from backend.chat.engine import ChatEngine
from backend.chat.generation import GenerationSettings, Reply
from backend.chat.gguf_targets import file_target
from backend.chat.targets import GGUF
from backend.models.loading import load_tokenizer

PROMPT = "What is the capital of France?"
TOKENS = 16
LEVELS = ("q4_k_m", "q8_0", "f16")


@pytest.fixture(scope="module")
def offered(gguf_export, gguf_run):
    """The Chat tab's catalog of the GGUF run (value -> target), GGUF files included."""
    out, _ = gguf_export
    return catalog(gguf_run.parent, [gguf_run.name], str, out.parent)


@pytest.fixture(scope="module")
def engine():
    engine = ChatEngine()
    yield engine
    engine.unload()


def test_each_exported_level_is_offered_with_the_checkpoint_it_came_from(offered, gguf_export, gguf_run):
    out, report = gguf_export
    run = gguf_run.name
    files = {value: t for value, t in offered.items() if t.kind == GGUF}
    assert sorted(files) == sorted(f"{run}/gguf/assistant-{level}" for level in LEVELS)
    final = offered[f"{run}/final"]
    for value, target in files.items():
        assert target.checkpoint == str(out / "gguf" / report["gguf"]["files"][target.level]["file"])
        assert (target.run_id, target.source, target.step) == (run, "final", final.step)
        assert target.tokenizer == str(out)       # the export's tokenizer: the run's training template
        assert f"assistant · {target.level} GGUF (from final)" in choice_label(value, target, False)
        assert f"**assistant · {target.level}** · GGUF of {run} / final" in header(target)
    assert not any("lora" in value for value in offered)   # the GGUF LoRA is an adapter, not a model


def test_a_gguf_column_is_greedy_with_the_training_template(engine, offered, gguf_run):
    """Its prompt is the run's template tokenised by llama.cpp, equal to transformers' tokens, and its
    answer is the argmax of llama.cpp's logits at every step: no repeat penalty, no top-k."""
    from backend.models.gguf_engine import GGUFModel

    target = offered[f"{gguf_run.name}/gguf/assistant-q8_0"]
    reply = engine.answer(target, PROMPT, GenerationSettings(max_new_tokens=TOKENS))
    assert reply.finish in ("eos", "length") and reply.new_tokens > 0, reply.error

    tokenizer = load_tokenizer(gguf_run / "final")
    messages = [{"role": "user", "content": PROMPT}]
    prompt = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False))
    loaded = engine._gguf[target.checkpoint]
    assert loaded.tokenizer.apply_chat_template(messages) == prompt

    answer = loaded.model.greedy(prompt, TOKENS)
    assert reply.new_tokens == len(answer) and reply.text == tokenizer.decode(answer, skip_special_tokens=True)
    # Every answer token is the argmax of llama.cpp's logits after the tokens before it, and the
    # answer ends at a stop token or at the limit.
    reference = GGUFModel(target.checkpoint, n_ctx=512, logits_all=True)   # every position's logits
    try:
        picks = [int(i) for i in np.argmax(reference.logits(prompt + answer)[len(prompt) - 1:], axis=1)]
        stops = reference.stop_ids
    finally:
        reference.close()
    assert picks[:-1] == answer
    assert len(answer) == TOKENS or picks[-1] in stops


def test_gguf_columns_answer_beside_the_adapter_and_the_base(engine, offered, gguf_run, gguf_export):
    """One send: the base and final through transformers, q4_k_m and f16 through llama.cpp; each
    GGUF column says what it says alone, and the f16 file answers as the adapter did where the
    export's own check found them equal."""
    _, report = gguf_export
    rows = report["gguf"]["checks"]["levels"]["f16"]["rows"]
    prompt = next((row["prompt"] for row in rows if row["equal"]), None)
    assert prompt, "no held-out prompt where f16 and the adapter agree; the export check should have failed"
    run = gguf_run.name
    values = [f"base@{run}", f"{run}/final", f"{run}/gguf/assistant-q4_k_m", f"{run}/gguf/assistant-f16"]
    targets = [offered[v] for v in values]
    settings = GenerationSettings(max_new_tokens=32)
    replies = [Reply() for _ in targets]
    seen = list(engine.stream_together(targets, [[] for _ in targets], prompt, settings, replies=replies))
    assert all(r.finish in ("eos", "length") for r in replies), [r.error for r in replies]
    assert seen[-1] == [r.text for r in replies]
    for target, reply in zip(targets[2:], replies[2:]):
        assert engine.answer(target, prompt, settings).text == reply.text
    assert replies[3].text == replies[1].text   # f16 == the adapter (transformers + peft) on this prompt


def test_sampling_repeats_with_its_seed_and_a_stop_string_ends_at_its_token(engine, offered, gguf_run):
    target = offered[f"{gguf_run.name}/gguf/assistant-q4_k_m"]
    sampled = GenerationSettings(greedy=False, temperature=0.9, top_p=0.95, top_k=40, max_new_tokens=TOKENS, seed=7)
    first, again = (engine.answer(target, PROMPT, sampled) for _ in range(2))
    assert first.text == again.text and first.new_tokens == again.new_tokens
    assert engine.answer(target, PROMPT, GenerationSettings(**{**sampled.to_dict(), "seed": 8})).text != first.text

    greedy = engine.answer(target, PROMPT, GenerationSettings(max_new_tokens=TOKENS))
    loaded = engine._gguf[target.checkpoint]
    ids = loaded.model.greedy(loaded.tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}]), TOKENS)
    texts = [loaded.tokenizer.decode(ids[:n]) for n in range(1, len(ids) + 1)]
    assert greedy.text == texts[-1] and len(texts) == greedy.new_tokens
    cut = next(n for n in range(3, len(texts) - 1) if texts[n].strip() and texts[n] != texts[n - 1])
    stop = texts[cut][len(texts[cut - 1]):]   # the text the (cut+1)-th token adds
    completes = next(n + 1 for n, text in enumerate(texts) if stop in text)   # tokens up to the one completing it
    stopped = engine.answer(target, PROMPT, GenerationSettings(max_new_tokens=TOKENS, stop_strings=(stop,)))
    assert stopped.new_tokens == completes < greedy.new_tokens
    assert stopped.text == texts[completes - 1]   # the caller (the API server) cuts at the stop string


def test_stop_ends_a_gguf_column_at_the_next_token(engine, offered, gguf_run):
    target = offered[f"{gguf_run.name}/gguf/assistant-q4_k_m"]
    stop, reply, made = threading.Event(), Reply(), None
    for text in engine.stream(target, [], PROMPT, GenerationSettings(max_new_tokens=TOKENS), stop=stop, reply=reply):
        if text and made is None:
            stop.set()
            made = reply.new_tokens
    assert reply.finish == "stopped" and reply.new_tokens == made < TOKENS


def test_a_file_llama_cpp_cannot_load_says_so_in_its_column(engine, tmp_path):
    broken = tmp_path / "exports" / "x" / "gguf" / "x-q4_k_m.gguf"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    replies = [Reply()]
    list(engine.stream_together([file_target(broken)], [[]], PROMPT, GenerationSettings(max_new_tokens=4),
                                replies=replies))
    assert replies[0].finish == "error"
    assert "llama.cpp cannot load" in replies[0].error and "export the checkpoint to GGUF again" in replies[0].error
    assert replies[0].error_message.id == "chat.gguf.unreadable"


def test_the_chat_tab_offers_and_answers_a_gguf_column(gguf_export, gguf_run):
    """The tab's handlers, as a browser calls them: the picker lists the run's GGUF files (the
    workspace's exports folder), and a send answers the adapter and its q4_k_m file side by side."""
    from backend.runs.workspace import Workspace
    from ui.chat_session import ChatSession
    from ui.context import UIContext
    from ui.i18n import merge_texts
    from ui.tabs import chat

    workspace = Workspace(gguf_run.parent.parent)
    services = chat.ChatServices(UIContext(workspace=workspace, texts=merge_texts(chat.TEXT), i18n=None))
    run = gguf_run.name
    _runs, picks, *_ = chat.refresh_choices(services, "en", [run], [], "cpu", {})
    values = [value for _label, value in picks["choices"]]
    assert f"{run}/gguf/assistant-q4_k_m" in values and values.index(f"{run}/final") < values.index(
        f"{run}/gguf/assistant-q4_k_m")
    chosen = [f"{run}/final", f"{run}/gguf/assistant-q4_k_m"]
    plan, _ = chat.plan_outputs(services, "en", [run], chosen, "cpu")
    assert "GGUF file, answered by llama.cpp on the CPU" in plan
    outputs = list(chat.send_prompt(services, "en", [run], chosen, "cpu", PROMPT, ChatSession(), False, "",
                                    True, 0.7, 0.9, 50, 1.0, 8, 0))
    last = outputs[-1]
    assert last[15].startswith("**Done.**"), last[15]
    assert "GGUF of" in last[6] and "llama.cpp, CPU" in last[6]          # the second column's header
    assert last[11][-1]["role"] == "assistant" and not last[11][-1]["content"].startswith("⚠️")
    services.engine.get().unload()
