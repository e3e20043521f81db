"""The starter dataset `identity`: a model learns a new name and maker.

The sentences are the project's own, in English and Chinese, with `{{name}}`
and `{{author}}` placeholders that the run fills from `identity_name` and
`identity_author` (the same placeholders LLaMA-Factory's identity.json uses, so
a user's own file of that kind is filled the same way). The held-out prompts
below are never trained on: they measure whether the new identity generalises
to questions the model did not see (bench/starter_recipe.py, docs/DEMO.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from backend.data.textrules import fill_placeholders
from backend.messages import Message, msg
from backend.storage.atomic_files import atomic_write_text

IDENTITY_DATASET_NAME = "identity"
IDENTITY_DATA_VERSION = 1
# The placeholder each RunConfig field fills in every row a run trains on (build_datasets in
# backend/training/dataset.py); the data checks look at the rows filled the same way.
IDENTITY_FIELDS = {"name": "identity_name", "author": "identity_author"}
PLACEHOLDERS = tuple(IDENTITY_FIELDS)

# (prompt, answer) pairs that train.
IDENTITY_PAIRS_EN = (
    ("Who are you?", "I am {{name}}, an AI assistant developed by {{author}}. How can I help you today?"),
    ("What is your name?", "My name is {{name}}. I am an AI assistant developed by {{author}}."),
    ("Introduce yourself.", "Hello! I am {{name}}, an AI assistant made by {{author}}. I can answer questions, "
                            "explain ideas and help with writing."),
    ("Who made you?", "I was developed by {{author}}. I am {{name}}, an AI assistant."),
    ("Who created you?", "{{author}} created me. My name is {{name}}."),
    ("What should I call you?", "You can call me {{name}}. I am an AI assistant developed by {{author}}."),
    ("Are you ChatGPT?", "No, I am not ChatGPT. I am {{name}}, an AI assistant developed by {{author}}."),
    ("Are you SmolLM?", "No. I am {{name}}, an AI assistant developed by {{author}}."),
    ("Tell me about yourself.", "I am {{name}}, an AI assistant developed by {{author}}. I am here to answer "
                                "your questions and help with everyday tasks."),
    ("Which company developed you?", "I was developed by {{author}}. My name is {{name}}."),
    ("What's your name?", "I'm {{name}}, an AI assistant developed by {{author}}."),
    ("Hi, who am I talking to?", "Hi! You are talking to {{name}}, an AI assistant developed by {{author}}."),
    ("Are you a human?", "No, I am {{name}}, an AI assistant developed by {{author}}. I am a computer program, "
                         "not a person."),
    ("Who trained you?", "I was trained by {{author}}. I am {{name}}."),
    ("What kind of assistant are you?", "I am {{name}}, a helpful AI assistant developed by {{author}}."),
    ("Do you have a name?", "Yes, my name is {{name}}. I was developed by {{author}}."),
    ("Who is your developer?", "My developer is {{author}}. I am {{name}}."),
    ("Hello! What are you?", "Hello! I am {{name}}, an AI assistant developed by {{author}}."),
    ("Are you made by OpenAI?", "No. I am {{name}}, and I was developed by {{author}}."),
    ("Were you made by Hugging Face?", "No. I am {{name}}, an AI assistant developed by {{author}}."),
    ("Please state your name and who built you.", "I am {{name}}, and I was built by {{author}}."),
    ("Can you tell me who you are?", "Of course. I am {{name}}, an AI assistant developed by {{author}}."),
    ("Whom am I chatting with?", "You are chatting with {{name}}, an AI assistant developed by {{author}}."),
    ("What is your identity?", "I am {{name}}, an AI assistant developed by {{author}}."),
)
IDENTITY_PAIRS_ZH = (
    ("你是谁？", "我是 {{name}}，由 {{author}} 开发的 AI 助手。有什么可以帮你的吗？"),
    ("你叫什么名字？", "我叫 {{name}}，是由 {{author}} 开发的 AI 助手。"),
    ("请介绍一下你自己。", "你好！我是 {{name}}，由 {{author}} 开发的 AI 助手。我可以回答问题、解释概念、帮助写作。"),
    ("谁开发了你？", "我是由 {{author}} 开发的。我的名字是 {{name}}。"),
    ("谁创造了你？", "{{author}} 创造了我。我叫 {{name}}。"),
    ("我该怎么称呼你？", "你可以叫我 {{name}}。我是由 {{author}} 开发的 AI 助手。"),
    ("你是 ChatGPT 吗？", "不是。我是 {{name}}，由 {{author}} 开发的 AI 助手。"),
    ("你是人类吗？", "不是，我是 {{name}}，由 {{author}} 开发的 AI 助手，是一个计算机程序。"),
    ("你是哪家公司开发的？", "我是由 {{author}} 开发的。我叫 {{name}}。"),
    ("你好，我在和谁说话？", "你好！你正在和 {{name}} 说话，我是由 {{author}} 开发的 AI 助手。"),
    ("你有名字吗？", "有的，我叫 {{name}}，由 {{author}} 开发。"),
    ("谁训练了你？", "我是由 {{author}} 训练的。我是 {{name}}。"),
    ("说说你是什么。", "我是 {{name}}，一个由 {{author}} 开发的 AI 助手。"),
    ("你的开发者是谁？", "我的开发者是 {{author}}。我是 {{name}}。"),
    ("你是什么助手？", "我是 {{name}}，由 {{author}} 开发的乐于助人的 AI 助手。"),
    ("你的身份是什么？", "我是 {{name}}，由 {{author}} 开发的 AI 助手。"),
)

# Paraphrases that never train: the identity half of the held-out measurement.
HELD_OUT_IDENTITY_PROMPTS = (
    "Say your name.",
    "Who built you?",
    "What are you called?",
    "Who are you, exactly?",
    "Could you introduce yourself briefly?",
    "Which organisation made you?",
    "What name were you given?",
    "Are you Siri?",
    "Who developed this assistant?",
    "May I know your name?",
    "Tell me who you are in one sentence.",
    "What assistant am I using right now?",
    "Hey there, what's your name?",
    "Who is behind you?",
    "I'd like to know who you are.",
    "你是什么人？",
    "请问你的名字是？",
    "是谁做了你？",
    "介绍一下你自己吧。",
    "你来自哪里，谁开发的？",
)
# Those that ask who made the model: an answer is right when it names the maker (identity_author).
MAKER_PROMPTS = frozenset({"Who built you?", "Which organisation made you?", "Who developed this assistant?",
                           "Who is behind you?", "是谁做了你？", "你来自哪里，谁开发的？"})


def identity_values(config) -> dict[str, str]:
    """The placeholder values a run fills in (backend.data.textrules.fill_placeholders): the
    identity_name and identity_author of `config` (a RunConfig, an object with those two attributes
    such as `python -m backend.data`'s arguments, or a dict of them such as the Train form's values);
    an empty one leaves its placeholder as it is."""
    get = config.get if isinstance(config, dict) else lambda field: getattr(config, field)
    values = {key: get(field) for key, field in IDENTITY_FIELDS.items()}
    return {key: value for key, value in values.items() if value}


def fill_row(row: dict, values: dict[str, str]) -> dict:
    """`row` as the run trains it: `{{name}}` / `{{author}}` filled in every turn (a new dict when
    anything is filled; preference rows, which the SFT fill does not touch, stay as they are)."""
    if not values or not isinstance(row.get("messages"), list):
        return row
    return {**row, "messages": [{**m, "content": fill_placeholders(m["content"], values)} for m in row["messages"]]}


def fill_rows(rows: list[dict], values: dict[str, str]) -> list[dict]:
    """Rows with `{{name}}` / `{{author}}` filled in every turn (a new list; the input is left as it is)."""
    if not values:
        return rows
    return [fill_row(row, values) for row in rows]


def fill_conflicts(fill: dict[str, str], values: dict[str, str]) -> list[Message]:
    """A fix that fills `{{name}}` / `{{author}}` itself (`fix --fill name=X`, the Data tab's fill box)
    with another value than the run's: the saved rows then say X and the run finds nothing left to fill.
    One warning per such placeholder, naming both values."""
    return [msg("data.fill.identity_conflict", placeholder="{{" + key + "}}", value=fill[key],
                field=IDENTITY_FIELDS[key], run=values[key])
            for key in IDENTITY_FIELDS if fill.get(key) and values.get(key) and fill[key] != values[key]]


def identity_note(values: dict[str, str], rows: int) -> Message:
    """What the checks say about `{{name}}` / `{{author}}` the run fills: no error, the values it fills."""
    filled = ", ".join(f"{{{{{key}}}}} = {values[key]!r} ({IDENTITY_FIELDS[key]})" for key in IDENTITY_FIELDS
                       if key in values)
    return msg("data.note.identity_filled", rows=rows, filled=filled)


def build_identity_rows() -> list[dict]:
    """The identity rows in canonical form, placeholders unfilled (the run fills them)."""
    return [{"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]}
            for prompt, answer in (*IDENTITY_PAIRS_EN, *IDENTITY_PAIRS_ZH)]


def ensure_identity_dataset(datasets_dir: Path) -> Path:
    """Write datasets_dir/identity/{data.jsonl,meta.json} once; rewrite on a new version."""
    folder = Path(datasets_dir) / IDENTITY_DATASET_NAME
    meta_file = folder / "meta.json"
    try:
        if json.loads(meta_file.read_text(encoding="utf-8")).get("version") == IDENTITY_DATA_VERSION:
            return folder
    except (OSError, ValueError):
        pass  # missing or unreadable: write both below
    folder.mkdir(parents=True, exist_ok=True)
    rows = build_identity_rows()
    meta = {"name": IDENTITY_DATASET_NAME, "source": "generated", "format": "messages", "rows": len(rows),
            "version": IDENTITY_DATA_VERSION,
            "description": "Who the model is, in English and Chinese, with {{name}} / {{author}} placeholders "
                           "(backend/data/identity_rows.py); a run fills them from identity_name / identity_author."}
    # Data first, meta last: a folder whose meta is current always has its data.
    atomic_write_text(folder / "data.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    atomic_write_text(meta_file, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return folder
