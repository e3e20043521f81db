"""Stop once the run knows its own rows: the epochs are then a ceiling, not a target.

A fixed number of epochs fits one dataset: the starter's identity rows are
learned in two or three passes, a small FAQ's facts take many more, and every
pass beyond what the data need costs time and wears away what the model knew.
So at the end of each epoch from MIN_EPOCHS on, the model answers PROBE_ROWS of
its own training rows greedily (never a held-out row: the learning report's
score stays a score on unseen prompts), judged by the learning report's rule
(backend/scoring/answer_rule.py: key facts, a JSON object's keys, else ROUGE-L).
When at least LEARNED_GOAL of them are right and end with the end of turn (not
all: a file's rows may disagree, and an answer that says the same in other words
is right for a reader), the run stops and final/ holds those weights. The rows
are asked PROBE_BATCH at a time, and a check stops asking once the goal is out
of reach.

Each check is logged and written to metrics.jsonl (kind "learned_check"), so
the Runs tab and summary.json say why the run ended where it did. The main
process generates; in a multi-process run it hands its decision to the others,
which wait for it at the broadcast.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time

from transformers import TrainerCallback

from backend.learning.entries import answer_prompts, limit_for
from backend.learning.questions import training_items
from backend.models.greedy import training_layout_kept
from backend.runs.files import append_metrics, read_status, update_status
from backend.scoring.answer_rule import judge_answer

log = logging.getLogger("backend.train")

PROBE_ROWS = 16
PROBE_BATCH = 8  # rows a generate call: a check past hope stops after the first
MIN_EPOCHS = 2  # no check before: one pass has rarely taught the answers' content
LEARNED_GOAL = 0.85  # of the asked rows right and ended: 14 of 16
CHECK_STAGE = "learned_check"  # the run's stage (status.json) while a check answers, with its count


def goal_count(asked: int) -> int:
    return math.ceil(LEARNED_GOAL * asked)


class LearnedStop(TrainerCallback):
    def __init__(self, job, tokenizer):
        self.job, self.tokenizer = job, tokenizer
        self.items = None
        self.limits: list[int] = []  # max_new_tokens of each batch of rows
        self.stopped_at: int | None = None  # the step whose check ended the run
        self.checks: list[dict] = []
        self.off = False

    def on_train_begin(self, args, state, control, **kwargs):
        if not self.job.is_main or self.items is not None:
            return
        try:
            self.items = training_items(self.job.config, self.job.workspace, PROBE_ROWS)
        except Exception as error:  # noqa: BLE001 - advice, not the run: it trains its epochs
            log.warning("learned stop: off for this run, its rows could not be read (%s: %s)",
                        type(error).__name__, error)
            self.off = True
            return
        self.items, self.limits = batches_of(self.tokenizer, self.items)

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        epoch = round(state.epoch or 0)
        if epoch < MIN_EPOCHS or state.global_step >= state.max_steps:
            return  # too early to say, or the ceiling: the run ends here anyway
        learned = False
        if self.job.is_main and not self.off and self.items:
            try:
                learned = self._check(model, state)
            except Exception as error:  # noqa: BLE001 - advice, not the run: it trains its epochs
                log.warning("learned stop: off for the rest of this run, a check failed (%s: %s)",
                            type(error).__name__, error)
                self.off = True
        if _decided_by_main(learned):
            self.stopped_at = state.global_step
            control.should_training_stop = True

    def _check(self, model, state) -> bool:
        started = time.monotonic()
        was_training = model.training
        model.eval()
        try:
            with training_layout_kept(model):
                asked, right, ended = self._ask(model)
        finally:
            if was_training:
                model.train()
            if (read_status(self.job.run_dir).get("stage") or {}).get("name") == CHECK_STAGE:
                update_status(self.job.run_dir, stage=None)
        seconds = time.monotonic() - started
        goal = goal_count(len(self.items))
        learned = right >= goal
        check = {"step": state.global_step, "epoch": round(state.epoch or 0, 4), "right": right, "ended": ended,
                 "asked": asked, "of": len(self.items), "learned": learned, "seconds": round(seconds, 2)}
        self.checks.append(check)
        append_metrics(self.job.run_dir, {"time": round(time.time(), 3), "kind": "learned_check", **check})
        log.info("learned check at step %d (epoch %d): %d of %d training answers asked right and ended (%d ended, "
                 "%d rows in all); %s (%.1f s)", state.global_step, round(state.epoch or 0), right, asked, ended,
                 len(self.items), "learned: the run stops here" if learned else f"goal {goal}", seconds)
        return learned

    def _ask(self, model) -> tuple[int, int, int]:
        """(rows asked, right and ended, ended), PROBE_BATCH rows at a time: once more rows are wrong
        than the goal allows, the rest are not asked (a check far from the goal costs one batch)."""
        allowed = len(self.items) - goal_count(len(self.items))
        asked = right = ended = 0
        for start, limit in zip(range(0, len(self.items), PROBE_BATCH), self.limits):
            batch = self.items[start:start + PROBE_BATCH]
            update_status(self.job.run_dir, stage={"name": CHECK_STAGE, "done": asked, "total": len(self.items)})
            answers = answer_prompts(model, self.tokenizer, [i.prompt for i in batch], limit)
            for item, (answer, done) in zip(batch, answers):
                right += bool(done and judge_answer(answer, item.reference, item.identity).right)
                ended += done
            asked += len(batch)
            if asked - right > allowed:
                break
        return asked, right, ended

    def summary(self) -> dict | None:
        if not self.checks:
            return None
        return {"stopped_at": self.stopped_at, "checks": self.checks,
                "seconds": round(sum(c["seconds"] for c in self.checks), 2), "goal": LEARNED_GOAL}


def batches_of(tokenizer, items: list) -> tuple[list, list[int]]:
    """(the rows in the order asked, max_new_tokens of each PROBE_BATCH of them): shortest references
    first, each batch with the report's limit for its own longest one, so an answer that does not
    end costs its batch no more than that, and a batch of short answers stops sooner."""
    lengths = [len(tokenizer(i.reference, add_special_tokens=False)["input_ids"]) for i in items]
    order = sorted(range(len(items)), key=lengths.__getitem__)
    lengths = [lengths[i] for i in order]
    limits = [limit_for(max(lengths[s:s + PROBE_BATCH])) for s in range(0, len(lengths), PROBE_BATCH)]
    return [items[i] for i in order], limits


def _decided_by_main(decision: bool) -> bool:
    """The main process's decision, on every process of a multi-process run."""
    with contextlib.suppress(ImportError):
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            box = [decision]
            dist.broadcast_object_list(box, src=0)
            return bool(box[0])
    return decision


def learned_stop_of(trainer) -> LearnedStop | None:
    return next((c for c in trainer.callback_handler.callbacks if isinstance(c, LearnedStop)), None)
