"""Preference data: the pairwise and KTO shapes people have -> canonical rows.

Canonical pairwise row (what DPO / ORPO / SimPO train on):
    {"prompt": [messages ending with a user turn], "chosen": [assistant turn], "rejected": [assistant turn]}
Canonical KTO row (unpaired, labelled):
    {"prompt": [messages], "completion": [assistant turn], "label": true | false}

Shapes detected (see `detect_pair_shape`):
  * pairwise-alpaca: LLaMA-Factory's `instruction`, `input`, `chosen`, `rejected` (+ `system`, `history`);
  * pairwise-sharegpt: `conversations` (or `messages`) + `chosen` / `rejected` turns
    (LLaMA-Factory's sharegpt with `ranking: true`);
  * pairwise: TRL's `prompt`, `chosen`, `rejected`, each text or a list of messages;
  * pairwise-transcript: only `chosen` / `rejected`, two whole conversations that share
    their prefix (HH-RLHF's "\\n\\nHuman: ... \\n\\nAssistant: ..." text, or message lists);
  * kto: answers labelled desirable (true) or undesirable (false): TRL's `prompt`, `completion`, `label`,
    or LLaMA-Factory's `kto_tag` column beside a conversation whose last turn is the answer (sharegpt /
    OpenAI messages) or beside alpaca's `instruction`, `input`, `output`.
An empty chosen / rejected answer converts (the `empty_answer` check reports it);
a missing column, null, or a value of the wrong type is a row problem.
"""

from __future__ import annotations

import re

from backend.data.turns import (
    KTO_FORMS,
    OPENAI_TAGS,
    SHAREGPT_TAGS,
    RowProblems,
    Shape,
    field_text,
    history_turns,
    read_turn,
    system_messages,
)
from backend.messages import msg

PAIR_SHAPES = ("pairwise-alpaca", "pairwise-sharegpt", "pairwise", "pairwise-transcript")
PREFERENCE_SHAPES = (*PAIR_SHAPES, "kto")
PAIR_KEYS = ("prompt", "instruction", "input", "output", "system", "history", "messages", "chosen", "rejected",
             "completion", "label")
TRANSCRIPT_TURN = re.compile(r"(?:^|\n\n)(Human|Assistant): ")


def is_preference(shape_name: str) -> bool:
    return shape_name in PREFERENCE_SHAPES


def is_preference_row(row: dict) -> bool:
    return "chosen" in row or "completion" in row


def detect_pair_shape(first: dict, mapping: dict[str, str] | None = None) -> Shape | None:
    """The preference shape of a first record (None when it is instruction data)."""
    columns = {k: k for k in first}
    if mapping:
        columns.update({k: v for k, v in mapping.items() if k in PAIR_KEYS})
        present = {k for k, v in columns.items() if v in first}
    else:
        present = set(first)
    pick = {k: columns[k] for k in PAIR_KEYS if k in present}
    if ("chosen" in present and "rejected" in present) or _labelled(first, pick, mapping):
        for conv in ("conversations", "messages"):
            if conv in first and conv not in pick.values() and "messages" not in (mapping or {}):
                pick["messages"] = conv
    if "label" in pick and _labelled(first, pick, mapping):
        return _kto_shape(first, pick)
    if "chosen" in present and "rejected" in present:
        if "messages" in pick:
            return Shape("pairwise-sharegpt", _only(pick, "messages", "chosen", "rejected", "system"),
                         _turn_tags(first, pick["messages"]))
        if "instruction" in pick:
            return Shape("pairwise-alpaca", _only(pick, "instruction", "input", "chosen", "rejected", "system",
                                                  "history"))
        if "prompt" in pick:
            return Shape("pairwise", _only(pick, "prompt", "chosen", "rejected", "system"), dict(OPENAI_TAGS))
        return Shape("pairwise-transcript", _only(pick, "chosen", "rejected"), dict(OPENAI_TAGS))
    return None


def _labelled(first: dict, pick: dict, mapping: dict | None) -> bool:
    """A KTO label beside a prompt and an answer: TRL's prompt / completion / label, or a label column that
    a mapping names (LLaMA-Factory's kto_tag) or that holds true / false beside a conversation or alpaca row
    (a bare `label` beside them may be a class of a classification set)."""
    if "label" not in pick or "chosen" in pick:
        return False
    if "prompt" in pick and "completion" in pick:
        return True
    named = bool(mapping and "label" in mapping) or isinstance(first.get(pick["label"]), bool)
    return named and ("messages" in pick or ("instruction" in pick and "output" in pick))


def _kto_shape(first: dict, pick: dict) -> Shape:
    form = next(form for form in KTO_FORMS if all(k in pick for k in form))
    extra = ("system",) if form != ("instruction", "output") else ("input", "system", "history")
    tags = _turn_tags(first, pick["messages"]) if form == ("messages",) else dict(OPENAI_TAGS)
    return Shape("kto", _only(pick, *form, *extra, "label"), tags)


def _turn_tags(first: dict, column: str) -> dict:
    """{role, content} or sharegpt's {from, value} keys, from the first turn of the conversation column."""
    sample = first.get(column)
    turn = next((t for t in sample if isinstance(t, dict)), {}) if isinstance(sample, list) else {}
    return dict(OPENAI_TAGS if "role" in turn or "from" not in turn else SHAREGPT_TAGS)


def _only(pick: dict, *keys: str) -> dict:
    return {k: pick[k] for k in keys if k in pick}


def convert_pair(raw: dict, shape: Shape) -> tuple[dict | None, RowProblems]:
    """One raw preference record -> (canonical row or None, problems)."""
    problems = RowProblems()
    cols = shape.columns
    for column in shape.required():
        if column not in raw or raw[column] is None:
            problems.add(column, msg("row.missing" if column not in raw else "row.null"))
    if problems:
        return None, problems
    if shape.name == "pairwise-transcript":
        row = _transcripts(raw[cols["chosen"]], raw[cols["rejected"]], cols, shape.tags, problems)
        return (None if problems else row), problems
    if shape.name == "kto" and "messages" in cols:
        prompt, completion = _conversation_answer(raw, shape, problems)
        row = {"prompt": prompt, "completion": completion, "label": _label(raw[cols["label"]], cols["label"], problems)}
    elif shape.name == "kto":
        prompt = _prompt(raw, shape, problems)
        answer = cols.get("completion", cols.get("output"))
        completion = _answer(raw[answer], answer, shape, problems)
        label = _label(raw[cols["label"]], cols["label"], problems)
        row = {"prompt": prompt, "completion": completion, "label": label}
    else:
        prompt = _prompt(raw, shape, problems)
        row = {"prompt": prompt, "chosen": _answer(raw[cols["chosen"]], cols["chosen"], shape, problems),
               "rejected": _answer(raw[cols["rejected"]], cols["rejected"], shape, problems)}
    if not problems and not any(m["role"] == "user" for m in prompt):
        problems.add(cols.get("prompt", cols.get("instruction", cols.get("messages", "prompt"))),
                     msg("row.no_user"))
    return (None if problems else row), problems


def _prompt(raw: dict, shape: Shape, problems: RowProblems) -> list[dict]:
    cols = shape.columns
    messages = system_messages(raw, cols, problems)
    if "instruction" in cols:  # LLaMA-Factory's alpaca pairs and KTO rows
        messages += history_turns(raw.get(cols.get("history", "history")), problems)
        instruction = field_text(raw.get(cols["instruction"]), cols["instruction"], problems)
        query = field_text(raw.get(cols.get("input", "input")), cols.get("input", "input"), problems, optional=True)
        if instruction is not None:
            messages.append({"role": "user", "content": f"{instruction}\n{query}" if query else instruction})
        return messages
    column = cols["messages"] if shape.name == "pairwise-sharegpt" else cols["prompt"]
    value = raw.get(column)
    if isinstance(value, str) and shape.name != "pairwise-sharegpt":
        return [*messages, {"role": "user", "content": value}]
    return messages + _messages(value, column, shape.tags, problems)


def _conversation_answer(raw: dict, shape: Shape, problems: RowProblems) -> tuple[list[dict], list[dict]]:
    """A labelled conversation (LLaMA-Factory's KTO rows) -> (the turns before the answer, [the answer])."""
    column = shape.columns["messages"]
    turns = system_messages(raw, shape.columns, problems) + _messages(raw.get(column), column, shape.tags, problems)
    if not problems and (not turns or turns[-1]["role"] != "assistant"):
        problems.add(column, msg("row.ends_with_user" if turns else "row.no_assistant"))
    return turns[:-1], turns[-1:]


def _messages(value, column: str, tags: dict, problems: RowProblems) -> list[dict]:
    if not isinstance(value, list) or not value:
        problems.add(column, msg("row.missing" if value is None else "row.text_or_messages"))
        return []
    out = []
    for i, turn in enumerate(value):
        if not isinstance(turn, dict):
            problems.add(f"{column}[{i}]", msg("row.message_object"))
            continue
        message = read_turn(turn, f"{column}[{i}]", _tags_for(turn, tags), problems)
        if message is not None:
            out.append(message)
    return out


def _tags_for(turn: dict, tags: dict) -> dict:
    """The shape's keys when the message has them (a dataset_info.json's own tags included); else the
    message's own keys decide: {role, content} or sharegpt's {from, value}."""
    if tags["role_tag"] in turn:
        return dict(tags)
    return dict(SHAREGPT_TAGS) if "from" in turn and "role" not in turn else dict(tags)


def _answer(value, column: str, shape: Shape, problems: RowProblems) -> list[dict]:
    """An answer as [assistant message]: text (every shape), one message object
    (LLaMA-Factory sharegpt) or a message list (TRL conversational)."""
    if isinstance(value, str):
        text = field_text(value, column, problems)
        return [{"role": "assistant", "content": text or ""}]
    if shape.name == "pairwise-alpaca":
        field_text(value, column, problems)  # the alpaca shape holds text: name the wrong type
        return []
    turns = [value] if isinstance(value, dict) else value
    messages = _messages(turns, column, shape.tags, problems)
    if messages and any(m["role"] != "assistant" for m in messages):
        problems.add(column, msg("row.assistant_only"))
    return messages


def _label(value, column: str, problems: RowProblems) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    problems.add(column, msg("row.kto_label", value=value))
    return None


def _transcripts(chosen, rejected, cols: dict, tags: dict, problems: RowProblems) -> dict | None:
    """Two whole conversations -> the shared prefix as prompt, the differing last assistant turns."""
    a = _conversation(chosen, cols["chosen"], tags, problems)
    b = _conversation(rejected, cols["rejected"], tags, problems)
    if problems:
        return None
    if not a or not b or a[-1]["role"] != "assistant" or b[-1]["role"] != "assistant":
        problems.add(cols["chosen"], msg("row.pair_ends"))
        return None
    if a[:-1] != b[:-1]:
        problems.add(cols["rejected"], msg("row.pair_prompt"))
        return None
    return {"prompt": a[:-1], "chosen": a[-1:], "rejected": b[-1:]}


def _conversation(value, column: str, tags: dict, problems: RowProblems) -> list[dict]:
    if isinstance(value, list):
        return _messages(value, column, tags, problems)
    if not isinstance(value, str):
        field_text(value, column, problems)
        return []
    parts = TRANSCRIPT_TURN.split(value)
    if len(parts) < 3:
        problems.add(column, msg("row.hh_turns"))
        return []
    roles = {"Human": "user", "Assistant": "assistant"}
    return [{"role": roles[who], "content": text.strip()} for who, text in zip(parts[1::2], parts[2::2])]
