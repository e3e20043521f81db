"""Row shapes (alpaca, sharegpt, OpenAI messages, a column mapping) -> the
canonical row {"messages": [{"role", "content"}, ...]}.

Tool turns. The canonical roles are system / user / assistant only, so every
chat template can render them:
  * sharegpt `function_call` (and OpenAI `tool_calls`) -> an assistant turn
    whose content is the call as JSON: the model learns to emit the call;
  * sharegpt `observation` (and OpenAI `tool`) -> a user turn starting with
    "Tool result:" so the model sees results as input, never trains on them;
  * the `tools` column -> appended to the system message, with one line on
    how to call a tool.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from backend.data.errors import DataError
from backend.data.unsupported import is_pretraining_text, media_in_row, placeholder_in
from backend.messages import Message, msg

OBSERVATION_PREFIX = "Tool result:\n"
TOOLS_PREAMBLE = 'You can call these tools. To call one, reply with only a JSON object {"name": ..., "arguments": {...}}.'
# A field longer than this is a broken export or an embedded file, not training text.
MAX_FIELD_CHARS = 1_000_000

ALPACA_KEYS = ("instruction", "input", "output", "system", "history")
# LLaMA-Factory's column names for the same fields.
ALPACA_ALIASES = {"prompt": "instruction", "query": "input", "response": "output"}
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
        if self.name in ("pairwise-alpaca", "pairwise-sharegpt", "pairwise", "pairwise-transcript", "kto"):
            from backend.data.pairwise import required_columns

            return required_columns(self)
        return [self.columns["instruction"], self.columns["output"]] if self.name == "alpaca" else [self.columns["messages"]]


class RowProblems(list):
    """(field, message) pairs found while converting one row."""

    def add(self, where: str, message: str | Message) -> None:
        self.append((where, message))


def detect_shape(first: dict, file: str, mapping: dict[str, str] | None = None, row: int = 0) -> Shape:
    from backend.data.pairwise import detect_pair_shape

    preference = detect_pair_shape(first, mapping)  # chosen / rejected or completion + label
    if preference is not None:
        if mapping:
            preference.origin = "mapping"
        return preference
    if ("chosen" in first) != ("rejected" in first):
        has, lacks = ("chosen", "rejected") if "chosen" in first else ("rejected", "chosen")
        raise DataError(file, msg("data.pair_half", has=has, lacks=lacks), msg("data.hint.pair_half"), row=row)
    if mapping:
        return shape_from_mapping(mapping, first, file)
    if "conversations" in first:
        return _conversation_shape("conversations", first)
    if "messages" in first:
        return _conversation_shape("messages", first)
    if "instruction" in first and "output" in first:
        return Shape("alpaca", {k: k for k in ALPACA_KEYS if k in first or k in ("instruction", "output", "input")})
    if is_pretraining_text(first):
        raise DataError(file, msg("data.pretraining_text", column="text"), msg("data.hint.pretraining"), row=row)
    raise DataError(
        file,
        msg("data.no_shape", columns=", ".join(map(str, first)) or "(none)"),
        msg("data.hint.shapes", example=_suggest_mapping(first)),
        row=row,
    )


def _suggest_mapping(first: dict) -> str:
    names = {k.lower(): k for k in first}
    prompt = next((names[n] for n in ("question", "prompt", "query", "input", "text") if n in names), "QUESTION")
    answer = next((names[n] for n in ("answer", "response", "output", "completion") if n in names), "ANSWER")
    return f"--mapping instruction={prompt},output={answer}"


def _conversation_shape(column: str, first: dict) -> Shape:
    turns = first.get(column)
    sample = next((t for t in turns if isinstance(t, dict)), {}) if isinstance(turns, list) else {}
    openai = "role" in sample or ("from" not in sample and column == "messages")
    columns = {"messages": column}
    for extra in ("system", "tools"):
        if extra in first:
            columns[extra] = extra
    return Shape("openai" if openai else "sharegpt", columns, dict(OPENAI_TAGS if openai else SHAREGPT_TAGS))


def shape_from_mapping(mapping: dict[str, str], first: dict, file: str, origin: str = "mapping") -> Shape:
    """An explicit mapping: alpaca fields (or LLaMA-Factory's prompt/query/response) or messages + tags."""
    mapping = {ALPACA_ALIASES.get(k, k): v for k, v in mapping.items()}
    tags = {k: v for k, v in mapping.items() if k.endswith("_tag")}
    columns = {k: v for k, v in mapping.items() if not k.endswith("_tag")}
    unknown = set(columns) - set(ALPACA_KEYS) - {"messages", "conversations", "tools"}
    if unknown:
        raise DataError(
            file,
            msg("data.unknown_mapping", keys=", ".join(sorted(unknown))),
            msg("data.hint.mapping_keys"),
        )
    if "conversations" in columns:
        columns["messages"] = columns.pop("conversations")
    missing = [v for v in columns.values() if v not in first]
    if missing and origin == "mapping":
        raise DataError(
            file,
            msg("data.mapped_missing", columns=", ".join(missing)),
            msg("data.hint.columns_are", columns=", ".join(map(str, first))),
            row=0,
        )
    if "messages" in columns:
        base = _conversation_shape(columns["messages"], {columns["messages"]: first.get(columns["messages"])})
        base.tags.update(tags)
        base.columns = columns
        base.origin = origin
        return base
    columns.setdefault("instruction", "instruction")
    columns.setdefault("output", "output")
    return Shape("alpaca", columns, origin=origin)


def known_shape_of(row: dict) -> str | None:
    """Cheap per-row guess, used to tell a mixed-shape file from a row with a missing field."""
    if "chosen" in row or ("completion" in row and "label" in row):
        return "preference"
    if "conversations" in row or "messages" in row:
        return "conversation"
    if "instruction" in row and "output" in row:
        return "alpaca"
    return None


def _text(value, where: str, problems: RowProblems, optional: bool = False) -> str | None:
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


def _field(raw: dict, column: str, problems: RowProblems) -> str | None:
    if column not in raw:
        problems.add(column, msg("row.missing"))
        return None
    return _text(raw[column], column, problems)


def convert(raw: dict, shape: Shape) -> tuple[dict | None, RowProblems, set[str]]:
    """One raw row -> (canonical row or None, problems, flags)."""
    problems, flags = RowProblems(), set()
    media = media_in_row(raw)
    if media:  # the model would never see them: refused before the text is read
        problems.add(*media)
        return None, problems, flags
    if shape.name.startswith(("pairwise", "kto")):
        from backend.data.pairwise import convert_pair

        row, problems = convert_pair(raw, shape)
        if row is not None:
            _refuse_placeholders([m for key in ("prompt", "chosen", "rejected", "completion")
                                  for m in row.get(key, [])], shape, problems)
        return (None if problems else row), problems, flags
    if shape.name == "alpaca":
        messages = _alpaca(raw, shape.columns, problems, flags)
    else:
        messages = _conversation(raw, shape, problems)
    if messages is not None and not problems:
        _refuse_placeholders(messages, shape, problems)
    if problems or messages is None:
        return None, problems, flags
    return {"messages": messages}, problems, flags


def _refuse_placeholders(messages: list[dict], shape: Shape, problems: RowProblems) -> None:
    problem = placeholder_in(m["content"] for m in messages)
    if problem:
        cols = shape.columns
        # the column the text came from (a transcript pair has only its chosen / rejected columns)
        problems.add(next(cols[k] for k in ("messages", "instruction", "prompt", "chosen") if k in cols), problem)


def _system(raw: dict, columns: dict, problems: RowProblems) -> list[dict]:
    system = _text(raw.get(columns.get("system", "system")), columns.get("system", "system"), problems, optional=True)
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


def _alpaca(raw: dict, columns: dict, problems: RowProblems, flags: set[str]) -> list[dict] | None:
    instruction = _field(raw, columns["instruction"], problems)
    query = _text(raw.get(columns.get("input", "input")), columns.get("input", "input"), problems, optional=True)
    output = _field(raw, columns["output"], problems)
    messages = _system(raw, columns, problems)
    messages += _history(raw.get(columns.get("history", "history")), problems)
    if instruction is None or output is None:
        return None
    if not query or not query.strip():
        flags.add("empty_input")
    user = f"{instruction}\n{query}" if query else instruction
    return [*messages, {"role": "user", "content": user}, {"role": "assistant", "content": output}]


def _history(value, problems: RowProblems) -> list[dict]:
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
        q = _text(pair[0], f"history[{i}][0]", problems)
        a = _text(pair[1], f"history[{i}][1]", problems)
        turns += [{"role": "user", "content": q or ""}, {"role": "assistant", "content": a or ""}]
    return turns


def _conversation(raw: dict, shape: Shape, problems: RowProblems) -> list[dict] | None:
    column = shape.columns["messages"]
    turns = raw.get(column)
    if not isinstance(turns, list) or not turns:
        problems.add(column, msg("row.missing" if turns is None else "row.turns"))
        return None
    messages = _system(raw, shape.columns, problems)
    for i, turn in enumerate(turns):
        where = f"{column}[{i}]"
        if not isinstance(turn, dict):
            problems.add(where, msg("row.turn_object"))
            continue
        message = _turn(turn, where, shape.tags, problems)
        if message is None:
            continue
        if message["role"] == "system" and messages and i > 0:
            problems.add(where, msg("row.system_first"))
        elif message["role"] == "system" and messages and messages[0]["role"] == "system":
            messages[0]["content"] = message["content"] + "\n\n" + messages[0]["content"]
        else:
            messages.append(message)
    if not problems:
        _check_turn_order(messages, column, problems)
    return messages


def _turn(turn: dict, where: str, tags: dict, problems: RowProblems) -> dict | None:
    role = turn.get(tags["role_tag"])
    content_value = turn.get(tags["content_tag"])
    if tags["role_tag"] == "role" and role == "assistant" and content_value is None and turn.get("tool_calls"):
        content_value = json.dumps(turn["tool_calls"], ensure_ascii=False)
    if isinstance(content_value, list):
        content_value = _content_parts(content_value, f"{where}.{tags['content_tag']}", problems)
        if content_value is None:
            return None  # the part is named; "is empty" on top of it would mislead
    content = _text(content_value, f"{where}.{tags['content_tag']}", problems)
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


def _check_turn_order(messages: list[dict], column: str, problems: RowProblems) -> None:
    if not any(m["role"] == "assistant" for m in messages):
        problems.add(column, msg("row.no_assistant"))
    elif messages[-1]["role"] != "assistant":
        problems.add(column, msg("row.ends_with_user"))
