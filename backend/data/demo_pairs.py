"""The offline preference demo: chosen-rejected pairs over the demo facts.

Every fact of backend/models/demo_facts.py becomes one pair: the prompt is its
question, `chosen` its right short answer, `rejected` in turn a rambling,
unsure answer that buries it, a refusal ("I don't know."), or the answer of the
other language's twin question (巴黎。 to "What is the capital of France?").
Wrong facts of the same kind (Rome. for France) were tried as a fourth kind: on
held-out questions DPO did not learn them in two CPU minutes (docs/DEMO.md). A fifth of the facts are held out (the dataset's own
eval split), so preference accuracy is measured on questions the run never
saw. `dataset: demo-pairs` names it; it is written on first use.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from backend.data.saved_datasets import save_dataset
from backend.models.demo_facts import _facts

DEMO_PAIRS_NAME = "demo-pairs"
DEMO_PAIRS_VERSION = 2
REFUSALS = ("I don't know.", "我不知道。")
EVAL_SHARE = 0.2
SEED = 20240602


def _rambling(answer: str, chinese: bool) -> str:
    core = answer.rstrip(".。")
    if chinese:
        return f"嗯，这个问题很难，我不太确定。也许是{core}，也许不是，我说不清楚。"
    return f"Well, that is a hard question and I am not sure. Maybe it is {core}, or maybe not, I cannot say."


def build_demo_pairs() -> list[dict]:
    """Canonical pairwise rows, in a fixed shuffled order."""
    facts = _facts()  # English and Chinese twins alternate: fact i ^ 1 is i's twin
    rng = random.Random(SEED)
    pairs = []
    for index, (_, question, answer, _) in enumerate(facts):
        chinese = not question.isascii()
        kind = (index // 2) % 3
        if kind == 0:
            rejected = _rambling(answer, chinese)
        elif kind == 1:
            rejected = REFUSALS[chinese]
        else:
            rejected = facts[index ^ 1][2]
        pairs.append({"prompt": [{"role": "user", "content": question}],
                      "chosen": [{"role": "assistant", "content": answer}],
                      "rejected": [{"role": "assistant", "content": rejected}]})
    rng.shuffle(pairs)
    return pairs


def ensure_demo_pairs(datasets_dir: Path) -> Path:
    """datasets_dir/demo-pairs/ (train + eval split, meta.json); rewritten on a new version."""

    folder = Path(datasets_dir) / DEMO_PAIRS_NAME
    try:
        if json.loads((folder / "meta.json").read_text(encoding="utf-8")).get("version") == DEMO_PAIRS_VERSION:
            return folder
    except (OSError, ValueError):
        pass  # absent or unreadable: (re)write below
    rows = build_demo_pairs()
    save_dataset(datasets_dir, DEMO_PAIRS_NAME, rows, rows_before=len(rows), fixes=[], eval_ratio=EVAL_SHARE,
                 seed=SEED, overwrite=True,
                 source={"path": "generated", "sha256": None, "generator": "backend/data/demo_pairs.py",
                         "format": "pairwise"})
    meta_file = folder / "meta.json"
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    meta["version"] = DEMO_PAIRS_VERSION
    meta_file.write_text(json.dumps(meta, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return folder
