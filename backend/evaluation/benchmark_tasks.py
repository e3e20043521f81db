"""The benchmark tasks the project writes itself: lm-evaluation-harness task
files (YAML + a JSON Lines data file, `dataset_path: json` with
`dataset_kwargs.data_files`), so benchmarks run with no hub at all.

    studio_facts_choice    multiple choice over the demo facts (capitals, colours, opposites,
                           sums, translations; English and Chinese): 40 questions, 4 answers each
    studio_facts_answer    the 20 demo prompts answered greedily, exact match with the short answer
    studio_general_choice  multiple choice over the starter's held-out general questions (the
                           forgetting check of backend/evaluation/heldout.py): 38 questions, 4 answers

They are written from the tables in backend/data/ into workspace/benchmarks/<task>/
(`ensure_bundled_tasks`), rewritten when BUNDLED_VERSION changes; the data file
path in each YAML is absolute because lm-eval hands it to `datasets`, which
reads it relative to the working folder otherwise.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml

from backend.data.general_prompts import HELD_OUT_QUESTIONS
from backend.models.demo_facts import DEMO_PROMPTS, _facts
from backend.storage.atomic_files import atomic_write_text

BUNDLED_VERSION = "1"
BENCHMARKS_DIR = "benchmarks"
FACTS_CHOICE, FACTS_ANSWER, GENERAL_CHOICE = "studio_facts_choice", "studio_facts_answer", "studio_general_choice"
BUNDLED = (FACTS_CHOICE, FACTS_ANSWER, GENERAL_CHOICE)
# The metric the Evaluate tab charts for each bundled task (lm-eval's own names).
PRIMARY_METRIC = {FACTS_CHOICE: "acc", FACTS_ANSWER: "exact_match", GENERAL_CHOICE: "acc"}

# Three wrong answers per held-out general question, in HELD_OUT_QUESTIONS order.
GENERAL_DISTRACTORS = (
    ("Lyon", "Madrid", "Brussels"), ("Kyoto", "Osaka", "Seoul"), ("Milan", "Venice", "Athens"),
    ("Munich", "Vienna", "Hamburg"), ("5", "10", "12"), ("12", "36", "60"), ("6", "4", "23"),
    ("20", "1000", "110"), ("green", "red", "yellow"), ("Saturn", "Earth", "Mars"),
    ("Venus", "Jupiter", "Mercury"), ("oxygen", "nitrogen", "helium"),
    ("Charles Dickens", "Jane Austen", "Mark Twain"), ("50", "0", "212"), ("6", "4", "10"),
    ("warm", "wet", "bright"), ("CO2", "O2", "NaCl"), ("5", "9", "3"), ("Spanish", "French", "English"),
    ("8", "2", "6"), ("milk", "silk", "wax"), ("Asia", "Europe", "South America"), ("100", "32", "-10"),
    ("elephant", "horse", "camel"), ("3", "4", "1"), ("Canada", "China", "Brazil"), ("Paris", "Dublin", "Oxford"),
    ("Kyiv", "Warsaw", "Minsk"), ("Sparta", "Rome", "Istanbul"), ("360", "300", "400"), ("25", "55", "0"),
    ("tiger", "bear", "wolf"), ("tomato", "onion", "potato"), ("blue", "red", "purple"),
    ("Pacific", "Indian", "Arctic"), ("Mars", "Venus", "the Moon"), ("1", "3", "0"), ("Moon", "Mars", "Polaris"),
)

DESCRIPTIONS = {
    FACTS_CHOICE: "picks the right demo fact among four (what the demo model learned in pre-training)",
    FACTS_ANSWER: "answers the demo prompts with exactly the short answer and stops (what the demo fine-tune teaches)",
    GENERAL_CHOICE: "picks the right answer to general questions that never train (what a fine-tune must not forget)",
}


def _facts_choice_docs() -> list[dict]:
    """Every fourth fact of each category and language (English and Chinese alternate),
    with three other answers of the same category and language as the wrong choices."""
    rng = random.Random(20240602)
    facts = _facts()
    docs = []
    for category in ("capital", "colour", "opposite", "sum", "translate"):
        for language in (0, 1):
            pool = [(q, a) for i, (c, q, a, _) in enumerate([f for f in facts if f[0] == category]) if i % 2 == language]
            answers = sorted({a for _, a in pool})
            for question, answer in pool[::max(1, len(pool) // 4)][:4]:
                wrong = rng.sample([a for a in answers if a != answer], 3)
                choices = [answer, *wrong]
                rng.shuffle(choices)
                docs.append({"question": question, "choices": choices, "answer": choices.index(answer),
                             "category": category})
    return docs


def _facts_answer_docs() -> list[dict]:
    return [{"question": question, "answer": answer} for question, answer in DEMO_PROMPTS]


def _general_choice_docs() -> list[dict]:
    rng = random.Random(20240603)
    docs = []
    for (question, accepted), wrong in zip(HELD_OUT_QUESTIONS, GENERAL_DISTRACTORS, strict=True):
        choices = [accepted[0], *wrong]
        rng.shuffle(choices)
        docs.append({"question": question, "choices": choices, "answer": choices.index(accepted[0])})
    return docs


def _choice_yaml(name: str, data: Path) -> dict:
    return {"task": name, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data)}},
            "test_split": "test", "output_type": "multiple_choice", "doc_to_text": "{{question}}",
            "doc_to_choice": "{{choices}}", "doc_to_target": "answer",
            "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True},
                            {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}],
            "metadata": {"version": float(BUNDLED_VERSION), "description": DESCRIPTIONS[name]}}


def _answer_yaml(name: str, data: Path) -> dict:
    # One line of answer at most; surrounding whitespace ignored, case and punctuation count.
    return {"task": name, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data)}},
            "test_split": "test", "output_type": "generate_until", "doc_to_text": "{{question}}",
            "doc_to_target": "{{answer}}",
            "generation_kwargs": {"until": ["\n"], "max_gen_toks": 24, "do_sample": False},
            "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True,
                             "regexes_to_ignore": ["^\\s+", "\\s+$"]}],
            "metadata": {"version": float(BUNDLED_VERSION), "description": DESCRIPTIONS[name]}}


BUILDERS = {FACTS_CHOICE: (_facts_choice_docs, _choice_yaml), FACTS_ANSWER: (_facts_answer_docs, _answer_yaml),
            GENERAL_CHOICE: (_general_choice_docs, _choice_yaml)}


def bundled_dir(workspace_root: Path) -> Path:
    return Path(workspace_root) / BENCHMARKS_DIR


def ensure_bundled_tasks(workspace_root: Path) -> Path:
    """Write workspace/benchmarks/<task>/{<task>.yaml,data.jsonl} for every bundled task (once per
    version); returns the folder to give lm-eval's TaskManager as include_path."""

    root = bundled_dir(workspace_root)
    for name, (docs, config) in BUILDERS.items():
        folder = root / name
        task_file = folder / f"{name}.yaml"
        stamp = folder / "VERSION"
        if stamp.is_file() and task_file.is_file() and stamp.read_text(encoding="utf-8").strip() == BUNDLED_VERSION:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        data = folder / "data.jsonl"
        atomic_write_text(data, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs()))
        atomic_write_text(task_file, yaml.safe_dump(config(name, data.resolve()), allow_unicode=True, sort_keys=False))
        atomic_write_text(stamp, BUNDLED_VERSION + "\n")  # last: a folder with a current stamp is whole
    return root
