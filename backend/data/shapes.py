"""Row shapes (alpaca, sharegpt, OpenAI messages, a column mapping) -> the
canonical row {"messages": [{"role", "content"}, ...]}.

Tool turns (read in turns.py, for preference rows too). The canonical roles
are system / user / assistant only, so every chat template can render them:
  * sharegpt `function_call` (and OpenAI `tool_calls`) -> an assistant turn
    whose content is the call as JSON: the model learns to emit the call;
  * sharegpt `observation` (and OpenAI `tool`) -> a user turn starting with
    "Tool result:" so the model sees results as input, never trains on them;
  * the `tools` column -> appended to the system message, with one line on
    how to call a tool.
"""

from __future__ import annotations

from backend.data.errors import DataError
from backend.data.pairwise import convert_pair, detect_pair_shape
from backend.data.turns import (
    OPENAI_TAGS,
    SHAREGPT_TAGS,
    RowProblems,
    Shape,
    field_text,
    history_turns,
    read_turn,
    system_messages,
)
from backend.data.unsupported import is_pretraining_text, media_in_row, placeholder_in
from backend.messages import msg

ALPACA_KEYS = ("instruction", "input", "output", "system", "history")
# LLaMA-Factory's column names for the same fields.
ALPACA_ALIASES = {"prompt": "instruction", "query": "input", "response": "output"}


def detect_shape(first: dict, file: str, mapping: dict[str, str] | None = None, row: int = 0) -> Shape:
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


def _field(raw: dict, column: str, problems: RowProblems) -> str | None:
    if column not in raw:
        problems.add(column, msg("row.missing"))
        return None
    return field_text(raw[column], column, problems)


def convert_row(raw: dict, shape: Shape) -> tuple[dict | None, RowProblems, set[str]]:
    """One raw row -> (canonical row or None, problems, flags)."""
    problems, flags = RowProblems(), set()
    media = media_in_row(raw)
    if media:  # the model would never see them: refused before the text is read
        problems.add(*media)
        return None, problems, flags
    if shape.name.startswith(("pairwise", "kto")):
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


def _alpaca(raw: dict, columns: dict, problems: RowProblems, flags: set[str]) -> list[dict] | None:
    instruction = _field(raw, columns["instruction"], problems)
    query = field_text(raw.get(columns.get("input", "input")), columns.get("input", "input"), problems, optional=True)
    output = _field(raw, columns["output"], problems)
    messages = system_messages(raw, columns, problems)
    messages += history_turns(raw.get(columns.get("history", "history")), problems)
    if instruction is None or output is None:
        return None
    if not query or not query.strip():
        flags.add("empty_input")
    user = f"{instruction}\n{query}" if query else instruction
    return [*messages, {"role": "user", "content": user}, {"role": "assistant", "content": output}]


def _conversation(raw: dict, shape: Shape, problems: RowProblems) -> list[dict] | None:
    """A conversation as LLaMA-Factory's sharegpt converter reads it: a first system turn is the system
    prompt (the system column is then not read), and the other turns alternate user, assistant."""
    column, tags = shape.columns["messages"], shape.tags
    turns = raw.get(column)
    if not isinstance(turns, list) or not turns:
        problems.add(column, msg("row.missing" if turns is None else "row.turns"))
        return None
    start, system = 0, None
    if isinstance(turns[0], dict) and turns[0].get(tags["role_tag"]) == tags["system_tag"]:
        first = read_turn(turns[0], f"{column}[0]", tags, problems)
        start, system = 1, (first["content"] if first else "")
    messages = system_messages(raw, shape.columns, problems, system)
    spoken = []  # (where, the file's role, message) of each turn after the system prompt
    for i, turn in enumerate(turns[start:], start):
        where = f"{column}[{i}]"
        if not isinstance(turn, dict):
            problems.add(where, msg("row.turn_object"))
            continue
        message = read_turn(turn, where, tags, problems)
        if message is None:
            continue
        if message["role"] == "system":
            problems.add(where, msg("row.system_first"))
            continue
        spoken.append((f"{where}.{tags['role_tag']}", turn.get(tags["role_tag"]), message))
    if not problems:
        _check_turn_order(spoken, column, problems)
    return messages + [message for _, _, message in spoken]


def _check_turn_order(spoken: list[tuple], column: str, problems: RowProblems) -> None:
    """An answer to learn, and turns that alternate user, assistant (tool results count as user turns, tool
    calls as assistant turns), as LLaMA-Factory requires: it skips any other row, so the app does too."""
    roles = [message["role"] for _, _, message in spoken]
    if "assistant" not in roles:
        problems.add(column, msg("row.no_assistant"))
        return
    for k, (where, role, message) in enumerate(spoken):
        expected = "user" if k % 2 == 0 else "assistant"
        if message["role"] != expected:
            problems.add(where, msg("row.roles_alternate", role=role, expected=expected))
            return
    if roles[-1] != "assistant":
        problems.add(column, msg("row.ends_with_user"))
