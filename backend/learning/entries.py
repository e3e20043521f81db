"""The learning report: what a run learned and what it kept, for the base and
each saved checkpoint, in RUN/eval/learning.json.

Every model answers the same prompts (backend/learning/questions.py)
greedily, in batches, through backend/models/greedy.py:

* learned: the share of held-out prompts answered right
  (backend/scoring/answer_rule.py: key facts, a JSON object's keys,
  else ROUGE-L), with the mean ROUGE-L beside it;
* kept: of the general questions the base answers right, the share the
  checkpoint still answers right (a question the base gets wrong says
  nothing about forgetting);
* ended: the share of the learned answers that ended with the end of turn
  within max_new_tokens (set from the references' lengths).

The worker writes an entry as each checkpoint is saved
(backend/training/learning_callback.py), within a time budget;
`python -m backend.evaluate --run R --learning` scores every checkpoint of a
finished run without one. The base's answers are the same for every run of a
model: they are cached beside the replay answers (workspace/datasets/.replay/),
the general questions by their text and the data's prompts by their messages,
so a run pays for them once per model and data.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from backend.learning.questions import KEPT_QUESTIONS, MAX_KEPT, LearningSet, spread
from backend.models.fingerprint import model_fingerprint
from backend.models.greedy import greedy_answers_ended, greedy_finished
from backend.models.loading import load_model
from backend.runs.files import BASE, EVAL_DIR
from backend.scoring.answer_rule import is_right_general, judge_answer
from backend.storage.atomic_files import atomic_write_json, atomic_write_text, read_json

log = logging.getLogger("backend.train")

LEARNING_FILE = "learning.json"
LEARNING_VERSION = 1
MAX_NEW_TOKENS = 128  # the limit replay's answers were kept under
MIN_NEW_TOKENS = 48
BATCH_SIZE = 24  # prompts a generate call: a batch ends once its longest answer does
BASE_CACHE_DIR = ".replay"  # workspace/datasets/.replay: the base model's own answers, replay's beside them
BASE_CACHE_SUFFIX = "-learning-base.jsonl"


def answer_limit(tokenizer, prompts: LearningSet) -> int:
    """max_new_tokens of the report: half again the longest reference answer, plus 16, within
    [MIN_NEW_TOKENS, MAX_NEW_TOKENS]. An answer that runs past it has not stopped where the answers
    it was taught stop, and short data is scored at a short limit's cost."""
    lengths = [len(tokenizer(item.reference, add_special_tokens=False)["input_ids"]) for item in prompts.learned]
    return limit_for(max(lengths, default=MAX_NEW_TOKENS))


def limit_for(longest: int) -> int:
    """max_new_tokens for answers whose longest reference is `longest` tokens (answer_limit's rule)."""
    return max(MIN_NEW_TOKENS, min(MAX_NEW_TOKENS, round(1.5 * longest) + 16))


def share_of(values: list[bool]) -> dict:
    """{"share": the true values' share (None for no values), "n": how many values}."""
    return {"share": (sum(values) / len(values)) if values else None, "n": len(values)}


def answer_prompts(model, tokenizer, prompts: list[list[dict]], max_new_tokens: int, progress=None,
                   offset: int = 0) -> list[tuple[str, bool]]:
    """(answer, ended) per prompt, greedy; `progress(done)` counts the answers given so far."""

    if not prompts:
        return []
    return greedy_answers_ended(model, tokenizer, prompts, max_new_tokens, BATCH_SIZE,
                                on_batch=(lambda done: progress(offset + done)) if progress else None)


def _question(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


class BaseAnswers:
    """The base model's answers, cached per model and chat template, so that only a model's first
    run generates them: the general questions (keyed by their text) and the data's prompts (keyed
    by their messages, `prompt_key`), so a second run on the same data (a sweep, a rerun at another
    learning rate) scores its base for free. They are kept as token ids at MAX_NEW_TOKENS: a greedy
    answer cut to a lower limit is its first tokens, so one cache serves every run's limit (an
    answer that ended after k tokens ended within a limit L > k)."""

    def __init__(self, cache: Path | None, tokenizer):
        self.cache, self.tokenizer = cache, tokenizer
        self.ids: dict[str, tuple[list[int], bool]] = {}
        if cache is not None:
            try:
                for line in cache.read_text(encoding="utf-8").splitlines():
                    record = json.loads(line)
                    self.ids[record["prompt"]] = (list(record["ids"]), bool(record["ended"]))
            except (OSError, ValueError, KeyError, TypeError):
                self.ids = {}

    def missing(self, questions: list[str]) -> list[str]:
        return [q for q in questions if q not in self.ids]

    def generate(self, model, questions: list[str], progress=None, offset: int = 0,
                 prompts: list[list[dict]] | None = None) -> None:
        """Answer `questions` at MAX_NEW_TOKENS and keep them (in the cache file too). `prompts`:
        the messages behind each key, where the keys are not general questions' texts."""

        if not questions:
            return
        on_batch = (lambda done: progress(offset + done)) if progress else None
        asked = prompts if prompts is not None else [_question(q) for q in questions]
        finished = greedy_finished(model, self.tokenizer, asked, MAX_NEW_TOKENS, BATCH_SIZE, on_batch=on_batch)
        self.ids.update(zip(questions, finished))
        if self.cache is not None:
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.cache, "".join(
                json.dumps({"prompt": q, "ids": ids, "ended": ended}) + "\n" for q, (ids, ended) in self.ids.items()))

    def generate_prompts(self, model, prompts: list[list[dict]], progress=None, offset: int = 0) -> None:
        """Answer the data's `prompts` that the cache does not hold yet."""
        keys = [prompt_key(p) for p in prompts]
        wanted = {k: p for k, p in zip(keys, prompts) if k not in self.ids}
        self.generate(model, list(wanted), progress, offset, prompts=list(wanted.values()))

    def answer(self, question: str, limit: int) -> tuple[str, bool]:
        """(text, ended) of the answer as generated with max_new_tokens `limit`."""
        ids, ended = self.ids[question]
        ended = ended and len(ids) < limit  # the stop token came within the limit
        return self.tokenizer.decode(ids[:limit], skip_special_tokens=True).strip(), ended


def prompt_key(messages: list[dict]) -> str:
    """The cache key of a data prompt: its messages as JSON (a general question's key is its text)."""
    return json.dumps(messages, ensure_ascii=False, sort_keys=True)


def base_cache_path(model_path, tokenizer, datasets_dir: Path | None) -> Path | None:
    """Per model, chat template and questions, beside the replay cache."""

    if datasets_dir is None:
        return None
    key = model_fingerprint(model_path, tokenizer, LEARNING_VERSION, KEPT_QUESTIONS, MAX_NEW_TOKENS)
    return Path(datasets_dir) / BASE_CACHE_DIR / f"{key}{BASE_CACHE_SUFFIX}"


def warm_base_answers(model_path, tokenizer, datasets_dir: Path, model=None,
                      prompts: list[list[dict]] = ()) -> int:
    """Answer the general questions, and the data's `prompts` (a first run's held-out prompts), with
    the base model into its cache ahead of that run (the app does it at start beside replay's
    answers); returns how many were answered now."""
    answers = BaseAnswers(base_cache_path(model_path, tokenizer, datasets_dir), tokenizer)
    questions = answers.missing([q for q, _ in KEPT_QUESTIONS])
    data_prompts = [p for p in prompts if prompt_key(p) not in answers.ids]
    if not questions and not data_prompts:
        return 0
    if model is None:
        import torch

        model = load_model(model_path, dtype=torch.float32).eval()
    log.info("learning report: the base model answers %d general questions and %d of the data's prompts once "
             "(cached)", len(questions), len(data_prompts))
    answers.generate(model, questions)
    answers.generate_prompts(model, data_prompts)
    return len(questions) + len(data_prompts)


def score_model(model, tokenizer, prompts: LearningSet, checkpoint: str, step: int, base_right: list[str] | None,
                base_answers: BaseAnswers | None = None, max_new_tokens: int = MAX_NEW_TOKENS,
                progress=None, limit: int | None = None) -> dict:
    """One entry of the report. `base_right`: the general questions the base answers right (None:
    this is the base, which answers all of them to find out). `progress(done, total)`. `limit`: at
    most this many prompts, half of them the data's (a model too slow for the report's budget)."""
    started = time.monotonic()
    # Of the base's right answers, MAX_KEPT spread through the list: the Chinese questions come last.
    questions = [q for q, _ in prompts.kept] if base_right is None else spread(tuple(base_right), MAX_KEPT)
    learned_items = prompts.learned
    if limit is not None:
        learned_items = learned_items[:max(1, (limit + 1) // 2)]
        questions = questions[:max(0, limit - len(learned_items))]
    learned_prompts = [item.prompt for item in learned_items]
    from_cache = base_right is None and base_answers is not None  # the base: its answers are cached per model
    cached = base_answers.missing(questions) if from_cache else questions
    new_learned = ([p for p in learned_prompts if prompt_key(p) not in base_answers.ids] if from_cache
                   else learned_prompts)
    total = len({prompt_key(p) for p in new_learned}) + len(cached)
    report = (lambda done: progress(done, total)) if progress else None
    if from_cache:
        base_answers.generate_prompts(model, new_learned, report)
        learned_answers = [base_answers.answer(prompt_key(p), max_new_tokens) for p in learned_prompts]
        base_answers.generate(model, cached, report, offset=total - len(cached))
        general = [base_answers.answer(q, max_new_tokens) for q in questions]
    else:
        learned_answers = answer_prompts(model, tokenizer, learned_prompts, max_new_tokens, report)
        general = answer_prompts(model, tokenizer, [_question(q) for q in cached], max_new_tokens, report,
                                 offset=len(learned_prompts))
    accepted = dict(prompts.kept)
    examples, learned, rouge = [], [], []
    for item, (answer, ended) in zip(learned_items, learned_answers):
        verdict = judge_answer(answer, item.reference, item.identity)
        learned.append(verdict.right)
        rouge.append(verdict.rouge_l)
        examples.append({"kind": "learned", "source": item.kind, "prompt": item.text, "reference": item.reference,
                         "answer": answer, "ended": ended, **verdict.as_dict()})
    right = []
    for question, (answer, ended) in zip(questions, general):
        ok = is_right_general(answer, accepted.get(question, ()))
        right.append(ok)
        examples.append({"kind": "kept", "prompt": question, "reference": " / ".join(accepted.get(question, ())),
                         "answer": answer, "ended": ended, "right": ok})
    # Ended: of the answers to the data's prompts, whose length the references tell; a general answer
    # may rightly run past a limit set by short references.
    ended_all = [e["ended"] for e in examples if e["kind"] == "learned"]
    entry = {"checkpoint": checkpoint, "step": step, "learned": share_of(learned),
             "kept": share_of(right) if base_right is not None else {"share": None, "n": sum(right),
                                                                    "of": len(right)},
             "ended": share_of(ended_all), "rouge_l": (sum(rouge) / len(rouge)) if rouge else None,
             "seconds": round(time.monotonic() - started, 2), "generated": total, "examples": examples}
    if base_right is None:
        entry["right_questions"] = [q for q, ok in zip(questions, right) if ok]
    return entry


# ---------------------------------------------------------------- the report file

def report_path(run_dir: Path) -> Path:
    return Path(run_dir) / EVAL_DIR / LEARNING_FILE


def load_report(run_dir: Path) -> dict | None:
    """RUN/eval/learning.json, or None when the run has none."""
    report = read_json(report_path(run_dir), default=None)
    return report if isinstance(report, dict) and report.get("checkpoints") is not None else None


def new_report(run_name: str, prompts: LearningSet, max_new_tokens: int, budget: dict | None = None) -> dict:
    return {"version": LEARNING_VERSION, "run": run_name, **prompts.as_dict(), "max_new_tokens": max_new_tokens,
            "budget": budget, "checkpoints": [], "skipped": [], "time": time.time()}


def _write(run_dir: Path, report: dict) -> None:
    path = report_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, report)


def put_entry(run_dir: Path, report: dict, entry: dict) -> dict:
    """`entry` in `report` (replacing one of the same checkpoint), ordered by step; written at once."""
    rows = [e for e in report["checkpoints"] if e["checkpoint"] != entry["checkpoint"]] + [entry]
    report["checkpoints"] = sorted(rows, key=lambda e: (e["step"], e["checkpoint"] == "final"))
    report["skipped"] = [s for s in report.get("skipped", []) if s["checkpoint"] != entry["checkpoint"]]
    report["time"] = time.time()
    _write(run_dir, report)
    return report


def skip_entry(run_dir: Path, report: dict, checkpoint: str, step: int, reason: str) -> dict:
    """A checkpoint the report did not score, with the sentence why (never a silent gap)."""
    report["skipped"] = [s for s in report.get("skipped", []) if s["checkpoint"] != checkpoint] + [
        {"checkpoint": checkpoint, "step": step, "reason": reason}]
    _write(run_dir, report)
    return report


def base_entry(report: dict) -> dict | None:
    return next((e for e in report.get("checkpoints", []) if e["checkpoint"] == BASE), None)


def summary_rows(report: dict) -> list[dict]:
    """One flat row per scored checkpoint: the numbers a table or a chart shows."""
    rows = []
    for entry in report.get("checkpoints", []):
        rows.append({"checkpoint": entry["checkpoint"], "step": entry["step"],
                     "learned": entry["learned"]["share"], "learned_n": entry["learned"]["n"],
                     "kept": entry["kept"]["share"], "kept_n": entry["kept"]["n"],
                     "ended": entry["ended"]["share"], "ended_n": entry["ended"]["n"],
                     "rouge_l": entry.get("rouge_l")})
    return rows


def answers_beside_base(report: dict, checkpoint: str) -> list[dict]:
    """Each prompt with the base's and `checkpoint`'s answers, and whether each is right."""
    base = base_entry(report) or {"examples": []}
    other = next((e for e in report.get("checkpoints", []) if e["checkpoint"] == checkpoint), None)
    if other is None:
        return []
    before = {(e["kind"], e["prompt"]): e for e in base["examples"]}
    return [{"kind": e["kind"], "prompt": e["prompt"], "reference": e["reference"],
             "base": (before.get((e["kind"], e["prompt"])) or {}).get("answer"),
             "base_right": (before.get((e["kind"], e["prompt"])) or {}).get("right"),
             "answer": e["answer"], "right": e["right"], "ended": e["ended"]}
            for e in other["examples"]]
