"""An eval set from a one-line description (Kiln's eval builder): the judge
endpoint writes N test prompts, each with the properties a good answer has.
The rows come back for the user to review and edit; only then are they
saved as a workspace dataset (datasets/<name>/), one chat row each: the
prompt as the user turn, the expected properties as the reference answer
(what a judge and ROUGE compare with), with the description in meta.json."""

from __future__ import annotations

import json
import re
import time

from backend.data.saved_datasets import save_dataset
from backend.judge.client import JudgeClient
from backend.messages import UserError, msg

MAX_PROMPTS = 50
EVALSET_TEMPLATE = """Write {n} varied test prompts for evaluating an assistant on this task:
{description}

For each prompt, say what a good answer must contain or do. Answer with only a JSON list, no other text:
[{{"prompt": "...", "expected": "..."}}, ...]"""
_LIST = re.compile(r"\[.*\]", re.DOTALL)


class EvalSetError(UserError, ValueError):
    """No usable rows; the message says what the judge answered or what to change."""


def evalset_prompt(description: str, n: int) -> str:
    return EVALSET_TEMPLATE.format(n=n, description=description.strip())


def parse_rows(answer: str) -> list[dict]:
    """[{"prompt", "expected"}] of the judge's answer; entries without a prompt are dropped."""
    found = _LIST.search(answer or "")
    try:
        items = json.loads(found.group(0)) if found else None
    except json.JSONDecodeError:
        items = None
    if not isinstance(items, list):
        return []
    return [{"prompt": str(item["prompt"]).strip(), "expected": str(item.get("expected") or "").strip()}
            for item in items if isinstance(item, dict) and str(item.get("prompt") or "").strip()]


def write_evalset(client: JudgeClient, description: str, n: int) -> list[dict]:
    """N rows (or fewer, when the judge wrote fewer) from the description; EvalSetError on none."""
    if not description.strip():
        raise EvalSetError(msg("judge.evalset_no_description"))
    if not 1 <= n <= MAX_PROMPTS:
        raise EvalSetError(msg("judge.evalset_count", n=n, most=MAX_PROMPTS))
    answer = client.ask(evalset_prompt(description, n))
    rows = parse_rows(answer)
    if not rows:  # once more, as for a verdict: a small judge often forgets the form
        answer = client.ask(evalset_prompt(description, n) + "\n\nStart your answer with [ and end it with ].")
        rows = parse_rows(answer)
    if not rows:
        raise EvalSetError(msg("judge.evalset_unparsed", answer=answer[:200]))
    return rows[:n]


def save_evalset(datasets_dir, name: str, rows: list[dict], description: str, overwrite: bool = False):
    """The reviewed rows as workspace dataset `name`; rows with an empty prompt are left out."""

    kept = [r for r in rows if str(r.get("prompt") or "").strip()]
    if not kept:
        raise EvalSetError(msg("judge.no_eval_rows", name=name))
    chat_rows = [{"messages": [{"role": "user", "content": r["prompt"].strip()},
                               {"role": "assistant", "content": str(r.get("expected") or "").strip()}]}
                 for r in kept]
    source = {"path": f"written by the judge from: {description[:200]}", "sha256": None, "format": "chat",
              "generator": "judge eval builder", "description": description,
              "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    return save_dataset(datasets_dir, name, chat_rows, source=source, fixes=[], rows_before=len(rows),
                        overwrite=overwrite)
