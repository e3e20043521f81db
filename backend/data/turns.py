"""What the instruction shapes (shapes.py) and the preference shapes (pairwise.py)
both read a row with: the Shape found for a file and the columns its rows need,
the problems found in one row, the role tags of sharegpt and OpenAI messages,
and the one reading of a text field, a system prompt (with its tools), an
alpaca history and a conversation turn. Below both, so neither shape module
imports the other to read a turn.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from backend.messages import Message, msg

OBSERVATION_PREFIX = "Tool result:\n"
TOOLS_PREAMBLE = 'You can call these tools. To call one, reply with only a JSON object {"name": ..., "arguments": {...}}.'
# A field longer than this is a broken export or an embedded file, not training text.
MAX_FIELD_CHARS = 1_000_000
SHAREGPT_TAGS = {
    "role_tag": "from",
    "content_tag": "value",
    "user_tag": "human",
    "assistant_tag": "gpt",
    "observation_tag": "observation",
    "function_tag": "function_call",
    "system_tag": "system",
}
OPENAI_TAGS = {
    "role_tag": "role",
    "content_tag": "content",
    "user_tag": "user",
    "assistant_tag": "assistant",
    "observation_tag": "tool",
    "function_tag": "function_call",
    "system_tag": "system",
}
# The columns a KTO row holds its prompt and answer in, besides the label.
KTO_FORMS = (("prompt", "completion"), ("messages",), ("instruction", "output"))


@dataclass
class Shape:
    name: str  # alpaca | sharegpt | openai
    columns: dict[str, str]  # canonical field -> the file's column
    tags: dict[str, str] = field(default_factory=dict)  # conversation role / content keys
    origin: str | Message = "detected"  # detected | mapping | msg("data.origin.entry") of a dataset_info.json

    def describe(self) -> str:
        return str(self.describe_message())

    def describe_message(self) -> Message:
        """'alpaca (instruction, output; detected)': the shape, its columns and where they came from."""
        cols = ", ".join(f"{k}={v}" if k != v else k for k, v in self.columns.items())
        origin = msg(f"data.origin.{self.origin}") if self.origin in ("detected", "mapping") else self.origin
        return msg("data.shape_found", shape=self.name, columns=cols, origin=origin)

    def required(self) -> list[str]:
        """The file's columns every row of this shape must hold."""
        if self.name == "kto":
            form = next(form for form in KTO_FORMS if all(k in self.columns for k in form))
            return [self.columns[k] for k in (*form, "label")]
        if self.name in ("pairwise-alpaca", "pairwise-sharegpt", "pairwise", "pairwise-transcript"):
            return [self.columns["chosen"], self.columns["rejected"]]
        return [self.columns["instruction"], self.columns["output"]] if self.name == "alpaca" else [self.columns["messages"]]


class RowProblems(list):
    """(field, message) pairs found while converting one row."""

    def add(self, where: str, message: str | Message) -> None:
        self.append((where, message))


def field_text(value, where: str, problems: RowProblems, optional: bool = False) -> str | None:
    """The value as text, or None with a problem recorded (wrong type, null, too long)."""
    if isinstance(value, str):
        if len(value) > MAX_FIELD_CHARS:
            problems.add(where, msg("row.too_long", chars=f"{len(value):,}", limit=f"{MAX_FIELD_CHARS:,}"))
            return None
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        if optional:
            return ""
        problems.add(where, msg("row.null"))
    elif isinstance(value, bool | int | float):
        problems.add(where, msg("row.number", value=value))
    elif isinstance(value, dict | list):
        problems.add(where, msg("row.object_not_text" if isinstance(value, dict) else "row.list_not_text"))
    else:
        problems.add(where, msg("row.type_not_text", type=type(value).__name__))
    return None


def system_messages(raw: dict, columns: dict, problems: RowProblems, system: str | None = None) -> list[dict]:
    """The row's system message: `system` when given (a conversation's own system turn, which LLaMA-Factory
    takes instead of the system column), else the system column; then the tools."""
    if system is None:
        column = columns.get("system", "system")
        system = field_text(raw.get(column), column, problems, optional=True)
    tools = _tools_text(raw.get(columns.get("tools", "tools")), problems)
    text = "\n\n".join(t for t in (system, tools) if t)
    return [{"role": "system", "content": text}] if text else []


def _tools_text(value, problems: RowProblems) -> str:
    if value in (None, "", []) or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return f"{TOOLS_PREAMBLE}\nTools:\n{value}"
    if not isinstance(value, list | dict):
        problems.add("tools", "must be a JSON list of tool descriptions")
        return ""
    return f"{TOOLS_PREAMBLE}\nTools:\n{json.dumps(value, ensure_ascii=False)}"


def history_turns(value, problems: RowProblems) -> list[dict]:
    if value in (None, "", []) or (isinstance(value, float) and math.isnan(value)):
        return []
    if not isinstance(value, list):
        problems.add("history", msg("row.history"))
        return []
    turns = []
    for i, pair in enumerate(value):
        if not (isinstance(pair, list | tuple) and len(pair) == 2):
            problems.add(f"history[{i}]", msg("row.history_pair"))
            continue
        q = field_text(pair[0], f"history[{i}][0]", problems)
        a = field_text(pair[1], f"history[{i}][1]", problems)
        turns += [{"role": "user", "content": q or ""}, {"role": "assistant", "content": a or ""}]
    return turns


def read_turn(turn: dict, where: str, tags: dict, problems: RowProblems) -> dict | None:
    role = turn.get(tags["role_tag"])
    content_value = turn.get(tags["content_tag"])
    if tags["role_tag"] == "role" and role == "assistant" and content_value is None and turn.get("tool_calls"):
        content_value = json.dumps(turn["tool_calls"], ensure_ascii=False)
    if isinstance(content_value, list):
        content_value = _content_parts(content_value, f"{where}.{tags['content_tag']}", problems)
        if content_value is None:
            return None  # the part is named; "is empty" on top of it would mislead
    content = field_text(content_value, f"{where}.{tags['content_tag']}", problems)
    roles = {
        tags["user_tag"]: "user",
        "human": "user",
        "user": "user",
        tags["assistant_tag"]: "assistant",
        "gpt": "assistant",
        "assistant": "assistant",
        tags["function_tag"]: "function_call",
        tags["observation_tag"]: "observation",
        "tool": "observation",
        tags["system_tag"]: "system",
    }
    canonical = roles.get(role) if isinstance(role, str) else None
    if canonical is None:
        problems.add(f"{where}.{tags['role_tag']}", msg("row.unknown_role", role=role, roles=", ".join(sorted(map(str, roles)))))
        return None
    if content is None:
        return None
    if canonical == "function_call":
        return {"role": "assistant", "content": content}
    if canonical == "observation":
        return {"role": "user", "content": OBSERVATION_PREFIX + content}
    return {"role": canonical, "content": content}


def _content_parts(parts: list, where: str, problems: RowProblems) -> str | None:
    """A list of content parts -> their text. OpenAI's parts hold it under `text`, LLaMA-Factory's
    newer ones under `value`; any other part (image_url, reasoning, tool_call ...) is named."""
    texts = []
    for i, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        text = next((part[key] for key in ("text", "value") if isinstance(part.get(key), str)), None) \
            if kind == "text" else None
        if text is None:
            named = kind if isinstance(kind, str) else type(part).__name__
            problems.add(f"{where}[{i}]", msg("row.text_part_empty") if kind == "text"
                         else msg("row.part_not_text", type=named))
            return None
        texts.append(text)
    return "".join(texts)
