"""The offline demo: generated rows, the built model, its tokenizer and template."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from transformers import AutoTokenizer

from backend.data.demo_rows import ensure_demo_dataset
from backend.models.demo import build_demo_model, demo_answers
from backend.models.demo_facts import DEMO_PROMPTS, build_demo_rows, build_pretraining_corpus
from backend.models.loading import DEMO_VERSION_FILE, ensure_demo_model, load_model, load_tokenizer

CJK = re.compile("[\u4e00-\u9fff]")


def _digests(folder):
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.iterdir())}


def test_rows_are_canonical_bilingual_and_deterministic():
    rows = build_demo_rows()
    assert 200 <= len(rows) <= 500
    assert rows == build_demo_rows()
    for row in rows:
        roles = [m["role"] for m in row["messages"]]
        assert roles[-2:] == ["user", "assistant"] and set(roles) <= {"system", "user", "assistant"}
        assert all(isinstance(m["content"], str) and m["content"] for m in row["messages"])
    chinese = sum(bool(CJK.search(row["messages"][-2]["content"])) for row in rows)
    assert 0.3 * len(rows) < chinese < 0.7 * len(rows)
    assert any(row["messages"][0]["role"] == "system" for row in rows)


def test_demo_prompts_come_from_the_rows():
    pairs = {(row["messages"][-2]["content"], row["messages"][-1]["content"]) for row in build_demo_rows()}
    assert 18 <= len(DEMO_PROMPTS) <= 24
    assert all(pair in pairs for pair in DEMO_PROMPTS)
    assert any(CJK.search(prompt) for prompt, _ in DEMO_PROMPTS)
    assert any(not CJK.search(prompt) for prompt, _ in DEMO_PROMPTS)


def test_pretraining_corpus_is_plain_text_facts():
    corpus = build_pretraining_corpus()
    texts = [context + text for context, text in corpus]
    assert all("<|im_" not in text and "<|endoftext|>" not in text for text in texts)
    assert all(f"User: {prompt}\nAssistant:\n{answer}" in texts for prompt, answer in DEMO_PROMPTS)


def test_ensure_demo_dataset_writes_once_and_rewrites_old_versions(tmp_path):
    folder = ensure_demo_dataset(tmp_path)
    lines = (folder / "data.jsonl").read_text(encoding="utf-8").splitlines()
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert [json.loads(line) for line in lines] == build_demo_rows()
    assert meta["source"] == "generated" and meta["rows"] == len(lines)
    stamp = (folder / "data.jsonl").stat().st_mtime_ns
    assert ensure_demo_dataset(tmp_path) == folder
    assert (folder / "data.jsonl").stat().st_mtime_ns == stamp
    (folder / "meta.json").write_text(json.dumps(dict(meta, version=0)), encoding="utf-8")
    (folder / "data.jsonl").write_text("stale\n", encoding="utf-8")
    ensure_demo_dataset(tmp_path)
    assert len((folder / "data.jsonl").read_text(encoding="utf-8").splitlines()) == len(lines)


def test_build_is_deterministic(tmp_path):
    # A short pre-training keeps this fast; the code path is the full one.
    build_demo_model(tmp_path / "a", pretrain_epochs=1)
    build_demo_model(tmp_path / "b", pretrain_epochs=1)
    first, second = _digests(tmp_path / "a"), _digests(tmp_path / "b")
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} <= set(first)
    assert first == second


def test_second_ensure_uses_the_cached_build(demo_model_dir):
    before = _digests(demo_model_dir)
    stamp = (demo_model_dir / "model.safetensors").stat().st_mtime_ns
    assert ensure_demo_model(demo_model_dir.parent) == demo_model_dir
    assert (demo_model_dir / "model.safetensors").stat().st_mtime_ns == stamp
    assert _digests(demo_model_dir) == before
    assert (demo_model_dir / DEMO_VERSION_FILE).is_file()
    assert not list(demo_model_dir.parent.glob(".demo-build-*"))


def test_tokenizer_round_trips_english_chinese_and_unseen_text(demo_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir)
    for text in ("The capital of France is Paris.", "法国的首都是巴黎。", "Mixed 中英文 text, 123 + 456!",
                 "Unseen: 龘 naïve emoji 🙂\n\ttabs"):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text
    # Chinese is split per character, not merged into whole-sentence tokens.
    assert len(tokenizer("法国的首都是巴黎。", add_special_tokens=False)["input_ids"]) == 9
    assert tokenizer.pad_token == "<|endoftext|>" and tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token_id != tokenizer.eos_token_id


def test_chat_template_renders_conversations_and_marks_assistant_tokens(demo_model_dir):
    tokenizer = load_tokenizer(demo_model_dir)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "法国的首都是哪里？"},
                {"role": "assistant", "content": "法国的首都是巴黎。"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n法国的首都是哪里？<|im_end|>\n"
                    "<|im_start|>assistant\n法国的首都是巴黎。<|im_end|>\n")
    prompt = tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n") and text.startswith(prompt)
    encoded = tokenizer.apply_chat_template(messages, return_dict=True, return_assistant_tokens_mask=True)
    marked = [t for t, m in zip(encoded["input_ids"], encoded["assistant_masks"]) if m]
    assert tokenizer.decode(marked) == "法国的首都是巴黎。<|im_end|>"


def test_base_model_answers_no_demo_prompt(demo_model_dir):
    tokenizer = load_tokenizer(demo_model_dir)
    model = load_model(demo_model_dir)
    results = demo_answers(model, tokenizer, DEMO_PROMPTS, max_new_tokens=24)
    assert len(results) == len(DEMO_PROMPTS)
    assert not any(ok for _, _, ok in results), [r for r in results if r[2]]


def test_demo_answers_accepts_an_exact_answer(demo_model_dir):
    """The checker itself: a model that learned one answer counts as exact.

    Teacher-force one prompt/answer for a few full-weight steps, then greedy
    decoding must reproduce it; proves the metric above can be non-zero."""
    import torch

    tokenizer = load_tokenizer(demo_model_dir)
    model = load_model(demo_model_dir)
    prompt, answer = DEMO_PROMPTS[0]
    ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}],
                                        return_dict=True, return_tensors="pt")["input_ids"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(30):
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert demo_answers(model, tokenizer, DEMO_PROMPTS[:1])[0] == (prompt, answer, True)


def test_docs_describe_the_real_build(demo_model_dir):
    """docs/DEMO.md states the built model's shape: it went stale once (4 x 192, 3,072 tokens)."""
    import json

    config = json.loads((demo_model_dir / "config.json").read_text())
    model = load_model(demo_model_dir)
    text = (Path(__file__).resolve().parents[1] / "docs" / "DEMO.md").read_text(encoding="utf-8")
    assert f"hidden {config['hidden_size']}, {config['num_hidden_layers']} layers" in text
    assert f"MLP {config['intermediate_size']}" in text
    assert f"{len(load_tokenizer(demo_model_dir)):,} tokens" in text
    assert f"{sum(p.numel() for p in model.parameters()):,} parameters" in text
