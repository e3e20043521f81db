"""A file of prompts alone (grpo's data): records with a `prompt` / `instruction`
/ `question` / `query` / `problem` column (and `input`), an optional `answer` /
`output` / `response` / `solution` column, or `messages` that end with a user
turn. The data backend refuses such a file as "nothing to train on" for sft;
dataset resolution (resolve.py) and grpo's prompts (backend/training/grpo_data.py)
read it here as canonical rows.
"""

from __future__ import annotations

from pathlib import Path

from backend.data.read import file_type, iter_records

PROMPT_KEYS = ("prompt", "instruction", "question", "query", "problem")
ANSWER_KEYS = ("answer", "output", "response", "solution", "reference")


def read_prompt_file(source: Path) -> list[dict]:
    """A file of prompts alone (no answers, or answers in a column of its own)."""
    rows = []
    for record in iter_records(source, file_type(source)):
        value = record.value if isinstance(record.value, dict) else {}
        messages = value.get("messages")
        if isinstance(messages, list) and messages and all(isinstance(m, dict) for m in messages):
            rows.append({"messages": [{"role": str(m.get("role")), "content": str(m.get("content") or "")}
                                      for m in messages]})
            continue
        key = next((k for k in PROMPT_KEYS if isinstance(value.get(k), str) and value[k].strip()), None)
        if key is None:
            continue
        text = value[key] + (f"\n\n{value['input']}" if isinstance(value.get("input"), str) and value["input"].strip() else "")
        turns = ([{"role": "system", "content": value["system"]}] if isinstance(value.get("system"), str) and value["system"] else [])
        turns.append({"role": "user", "content": text})
        answer = next((value[k] for k in ANSWER_KEYS if value.get(k) is not None and str(value[k]).strip()), None)
        if answer is not None:
            turns.append({"role": "assistant", "content": str(answer)})
        rows.append({"messages": turns})
    return rows
