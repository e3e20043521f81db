"""The learning report of one run, entry by entry (backend/learning/entries.py):
the worker's callback (backend/training/learning_callback.py) and the
command line (`python -m backend.evaluate --run R --learning`,
backend/evaluation/learning_run.py) both score through a LearningReporter,
so the numbers mean the same from either."""

from __future__ import annotations

import logging
from pathlib import Path

from backend.config import RunConfig
from backend.learning.entries import (
    BaseAnswers,
    answer_limit,
    base_cache_path,
    base_entry,
    load_report,
    new_report,
    put_entry,
    score_model,
    skip_entry,
)
from backend.learning.questions import MAX_KEPT, MIN_KEPT, learning_set
from backend.models.greedy import training_layout_kept
from backend.runs.files import BASE
from backend.runs.workspace import Workspace

log = logging.getLogger("backend.train")


class LearningReporter:
    """Scores models into RUN/eval/learning.json. A report of the same prompts already there
    (a resumed run, a second --learning) is kept and added to; other prompts start it anew."""

    def __init__(self, run_dir: Path, config: RunConfig, workspace: Workspace, tokenizer, model_path,
                 budget: dict | None = None, progress=None):
        self.run_dir, self.tokenizer, self.progress = Path(run_dir), tokenizer, progress
        self.prompts = learning_set(config, workspace)
        self.max_new_tokens = answer_limit(tokenizer, self.prompts)
        self.base_answers = BaseAnswers(base_cache_path(model_path, tokenizer, workspace.datasets_dir), tokenizer)
        fresh = new_report(self.run_dir.name, self.prompts, self.max_new_tokens, budget)
        old = load_report(self.run_dir)
        same = old is not None and all(old.get(k) == fresh.get(k) for k in
                                       ("version", "source", "rows", "learned_prompts", "kept_questions",
                                        "max_new_tokens"))
        self.report = old if same else fresh
        if budget is not None:
            self.report["budget"] = budget

    @property
    def has_base(self) -> bool:
        return base_entry(self.report) is not None

    def base_right(self) -> list[str]:
        """The general questions every checkpoint is asked: those the base answers right, none when
        it answers fewer than MIN_KEPT (the report then says kept was not measured, and why)."""
        right = (base_entry(self.report) or {}).get("right_questions", [])
        return right if len(right) >= MIN_KEPT else []

    def has(self, checkpoint: str) -> bool:
        return any(e["checkpoint"] == checkpoint for e in self.report["checkpoints"])

    @property
    def full_count(self) -> int:
        """Prompts a checkpoint is asked with no limit."""
        return len(self.prompts.learned) + min(len(self.base_right()), MAX_KEPT)

    def score(self, model, checkpoint: str, step: int, limit: int | None = None) -> dict:
        """Score `model` as `checkpoint`; the base first when it is the base (its right answers
        choose the general questions every checkpoint is asked). `limit`: fewer prompts."""
        is_base = checkpoint == BASE
        total = len(self.prompts.learned) + len(self.prompts.kept) if is_base else self.full_count

        def progress(done: int, count: int) -> None:
            if self.progress is not None:
                self.progress(checkpoint, done, count)

        progress(0, total)
        was_training = getattr(model, "training", False)
        model.eval()
        try:
            with training_layout_kept(model):
                entry = score_model(model, self.tokenizer, self.prompts, checkpoint, step,
                                    None if is_base else self.base_right(), self.base_answers if is_base else None,
                                    self.max_new_tokens, progress, limit)
        finally:
            if was_training:
                model.train()
        self.report = put_entry(self.run_dir, self.report, entry)
        log.info("learning report %s (step %d): learned %s, kept %s, ended %s (%.1f s)", checkpoint, step,
                 _share(entry["learned"]), _share(entry["kept"]), _share(entry["ended"]), entry["seconds"])
        return entry

    def reuse(self, scored: str, checkpoint: str) -> dict | None:
        """`checkpoint` holds the weights `scored` was scored on (final/ saved at that checkpoint's step):
        its entry is `scored`'s, named `checkpoint`, without answering again. None: `scored` has none."""
        entry = next((e for e in self.report["checkpoints"] if e["checkpoint"] == scored), None)
        if entry is None:
            return None
        entry = {**entry, "checkpoint": checkpoint, "seconds": 0.0, "generated": 0, "same_as": scored}
        self.report = put_entry(self.run_dir, self.report, entry)
        log.info("learning report %s (step %d): the weights of %s, scored at its save: learned %s, kept %s, ended %s",
                 checkpoint, entry["step"], scored, _share(entry["learned"]), _share(entry["kept"]),
                 _share(entry["ended"]))
        return entry

    def skip(self, checkpoint: str, step: int, reason: str) -> None:
        self.report = skip_entry(self.run_dir, self.report, checkpoint, step, reason)
        log.info("learning report %s (step %d): not scored, %s", checkpoint, step, reason)


def _share(part: dict) -> str:
    value = part.get("share")
    if value is None:
        return f"{part.get('n', 0)} right" if "of" in part else "-"
    return f"{value:.0%} of {part['n']}"
