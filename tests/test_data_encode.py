"""encode_messages / count_tokens: the chat template path, assistant-only labels,
truncation, and round trips from each input shape to training tokens."""

from __future__ import annotations

import json

import pytest
from data_cases.toks import BOS_TEMPLATE, CHATML, build_tokenizer

from backend.data.encode import IGNORE_INDEX, count_tokens, encode_messages
from backend.data.load import load_file_rows
from backend.data.turns import OBSERVATION_PREFIX

MULTI = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hello world"},
    {"role": "assistant", "content": "Eat well, sleep."},
    {"role": "user", "content": "你好"},
    {"role": "assistant", "content": "我是助手"},
]


@pytest.fixture(scope="module")
def chatml():
    return build_tokenizer(CHATML)


@pytest.fixture(scope="module")
def llama_like():
    return build_tokenizer(BOS_TEMPLATE)


def trained_text(tokenizer, encoded) -> str:
    return tokenizer.decode([t for t, label in zip(encoded.input_ids, encoded.labels) if label != IGNORE_INDEX])


def prompt_text(tokenizer, encoded) -> str:
    return tokenizer.decode([t for t, label in zip(encoded.input_ids, encoded.labels) if label == IGNORE_INDEX])


def test_only_assistant_turns_and_their_end_marker_are_trained_chatml(chatml):
    encoded = encode_messages(chatml, MULTI, cutoff_len=1000)
    # The newline after <|im_end|> is the next turn's layout: masked, as a {% generation %} block marks it.
    assert trained_text(chatml, encoded) == "Eat well, sleep.<|im_end|>我是助手<|im_end|>"
    prompt = prompt_text(chatml, encoded)
    assert "Hello world" in prompt and "你好" in prompt and "Be brief." in prompt
    assert prompt.endswith("<|im_start|>assistant\n\n") and "<|im_start|>assistant\nEat" not in prompt
    assert chatml.decode(encoded.input_ids) == chatml.apply_chat_template(MULTI, tokenize=False)
    assert encoded.length == len(encoded.input_ids) and not encoded.truncated and not encoded.response_cut


def test_template_with_its_own_bos_gets_exactly_one(llama_like):
    encoded = encode_messages(llama_like, MULTI, cutoff_len=1000)
    bos = llama_like.bos_token_id
    assert encoded.input_ids[0] == bos and encoded.input_ids.count(bos) == 1
    assert trained_text(llama_like, encoded) == "Eat well, sleep.</s>我是助手</s>"


def test_count_tokens_matches_encode_and_the_plain_template_path(chatml, llama_like):
    rows = [{"messages": MULTI}, {"messages": MULTI[1:3]}, {"messages": [MULTI[1], {"role": "assistant", "content": ""}]}]
    for tok in (chatml, llama_like):
        counted = count_tokens(tok, rows, batch_size=2)
        encoded = [encode_messages(tok, r["messages"], 10_000).length for r in rows]
        direct = [len(tok(tok.apply_chat_template(r["messages"], tokenize=False), add_special_tokens=False)["input_ids"])
                  for r in rows]
        assert counted == encoded == direct


def test_truncation_and_response_cut(chatml):
    full = encode_messages(chatml, MULTI[1:3], cutoff_len=10_000)
    first_trained = full.labels.index(next(label for label in full.labels if label != IGNORE_INDEX))
    inside = encode_messages(chatml, MULTI[1:3], cutoff_len=first_trained + 2)
    assert inside.truncated and not inside.response_cut and inside.length == full.length
    assert len(inside.input_ids) == len(inside.labels) == first_trained + 2
    assert inside.input_ids == full.input_ids[: first_trained + 2]
    prompt_only = encode_messages(chatml, MULTI[1:3], cutoff_len=first_trained)
    assert prompt_only.truncated and prompt_only.response_cut
    assert all(label == IGNORE_INDEX for label in prompt_only.labels)


def test_train_on_prompt_trains_every_token(chatml):
    encoded = encode_messages(chatml, MULTI, cutoff_len=1000, train_on_prompt=True)
    assert encoded.labels == encoded.input_ids


def test_template_that_is_not_prefix_stable_still_masks_the_content(chatml):
    # The header depends on the whole conversation, so prefixes differ from the full text.
    tok = build_tokenizer("{{ messages|length }} turns\n" + CHATML)
    encoded = encode_messages(tok, MULTI, cutoff_len=1000)
    assert trained_text(tok, encoded) == "Eat well, sleep.我是助手"


class _NoOffsets:
    """The same tokenizer seen as a slow one (no offset mapping)."""

    is_fast = False

    def __init__(self, tok):
        self.tok = tok

    def __call__(self, *args, **kwargs):
        return self.tok(*args, **kwargs)

    def apply_chat_template(self, *args, **kwargs):
        return self.tok.apply_chat_template(*args, **kwargs)


def test_tokenizer_without_offsets_gives_the_same_labels(chatml):
    fast = encode_messages(chatml, MULTI, cutoff_len=1000)
    slow = encode_messages(_NoOffsets(chatml), MULTI, cutoff_len=1000)
    assert trained_text(chatml, slow) == trained_text(chatml, fast)


def test_alpaca_round_trip_to_training_tokens(tmp_path, chatml):
    path = tmp_path / "a.json"
    path.write_text(json.dumps([{
        "instruction": "Translate", "input": "Guten Morgen", "output": "Good morning", "system": "You translate.",
        "history": [["Hi", "Hello!"]],
    }]), encoding="utf-8")
    row = load_file_rows(path).rows[0]
    assert row["messages"] == [
        {"role": "system", "content": "You translate."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Translate\nGuten Morgen"},
        {"role": "assistant", "content": "Good morning"},
    ]
    encoded = encode_messages(chatml, row["messages"], 1000)
    assert trained_text(chatml, encoded) == "Hello!<|im_end|>Good morning<|im_end|>"


def test_sharegpt_tool_turns_round_trip(shared_data, chatml):
    loaded = load_file_rows(shared_data / "glaive_toolcall_zh_demo.json")
    raw = json.loads((shared_data / "glaive_toolcall_zh_demo.json").read_text(encoding="utf-8"))[0]
    row = loaded.rows[0]
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert json.loads(raw["tools"])[0]["name"] in row["messages"][0]["content"]
    turns = raw["conversations"]
    assert row["messages"][2]["content"] == turns[1]["value"]  # the function call, as JSON
    assert row["messages"][3]["content"] == OBSERVATION_PREFIX + turns[2]["value"]
    encoded = encode_messages(chatml, row["messages"], 100_000)
    trained = trained_text(chatml, encoded)
    assert trained == f"{turns[1]['value']}<|im_end|>{turns[3]['value']}<|im_end|>"
    assert turns[2]["value"] not in trained


def test_messages_with_a_system_prompt(tmp_path, chatml):
    path = tmp_path / "m.jsonl"
    row = {"messages": [{"role": "system", "content": "Answer in French."},
                        {"role": "user", "content": [{"type": "text", "text": "Hello"}]},
                        {"role": "assistant", "content": "Bonjour"}]}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    canonical = load_file_rows(path).rows[0]["messages"]
    assert canonical[0] == {"role": "system", "content": "Answer in French."}
    assert canonical[1] == {"role": "user", "content": "Hello"}
    encoded = encode_messages(chatml, canonical, 1000)
    assert trained_text(chatml, encoded) == "Bonjour<|im_end|>"
    assert prompt_text(chatml, encoded).startswith("<|im_start|>system\nAnswer in French.<|im_end|>")


def test_demo_tokenizer_masks_like_its_generation_block(demo_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(demo_model_dir)
    encoded = encode_messages(tok, MULTI, cutoff_len=512)
    assert trained_text(tok, encoded).replace("\n", "") == "Eat well, sleep.<|im_end|>我是助手<|im_end|>"
    # The template marks the assistant tokens itself: our mask covers them all.
    marked = tok.apply_chat_template(MULTI, return_assistant_tokens_mask=True, return_dict=True)
    ids, mask = marked["input_ids"], marked["assistant_masks"]
    assert ids == encoded.input_ids
    assert all(label != IGNORE_INDEX for label, m in zip(encoded.labels, mask) if m)
