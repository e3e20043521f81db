"""The learning report as the run trains (backend/learning/):
the base before the first step, each checkpoint as it is saved, final/ at
the end, written to RUN/eval/learning.json so the Runs tab draws learned and
kept against the step while the run goes on.

The report may cost about BUDGET_SHARE of the training time. The base and
final/ are always scored (the base's general answers are cached per model);
a checkpoint in between is scored only while the time spent on the report,
with one more scoring for final/, stays within the budget of the training
time projected for the whole run (with the learned stop on, the time trained
so far: its steps are a ceiling). A checkpoint over it is listed in the
report as not scored, with the command that scores it. A stopped run's last
checkpoint is scored at the end: it is what the run has. The last entry
(final/ or that checkpoint) gets fewer prompts when the model answers too
slowly for END_SHARE of the training time (and END_FLOOR_S), and none below MIN_PROMPTS, with
the sentence why: a model too large for the machine never leaves a silent
blank.
Only the main process generates; the others wait at the next step's
collective, as they do for a save.
"""

from __future__ import annotations

import contextlib
import logging
import time

from transformers import TrainerCallback

from backend.learning.reporter import LearningReporter
from backend.messages import msg
from backend.runs.files import BASE, FINAL_DIR, read_status, update_status

log = logging.getLogger("backend.train")

BUDGET_SHARE = 0.10
END_SHARE = 0.25  # final/ (or a stopped run's last checkpoint) may take this much before it gets fewer prompts
MIN_PROMPTS = 8  # fewer than this says nothing: the entry is skipped with the sentence why
END_FLOOR_S = 60.0  # a last entry this quick is always scored in full, however short the run
LEARNING_STAGE = "learning"  # the run's stage (status.json) while the report scores a checkpoint


class LearningReport(TrainerCallback):
    def __init__(self, job, tokenizer, model_path):
        self.job, self.tokenizer, self.model_path = job, tokenizer, model_path
        self.reporter = None
        self.spent = 0.0  # seconds the report took in this session
        self.started = None  # when training began in this session
        self.step_at_start = 0
        self.per_answer = None  # seconds an answer took in the latest scoring
        self.off = False  # the report could not be set up: this run has none

    @property
    def scores(self) -> bool:
        """This process writes the report: the main one, with a report to write."""
        return self.job.is_main and not self.off

    # ------------------------------------------------------------ the reporter
    def _reporter(self):
        if self.reporter is None:
            self.reporter = LearningReporter(self.job.run_dir, self.job.config, self.job.workspace, self.tokenizer,
                                             self.model_path, budget={"share": BUDGET_SHARE},
                                             progress=self._progress)
        return self.reporter

    def _progress(self, checkpoint: str, done: int, total: int) -> None:
        update_status(self.job.run_dir, stage={"name": LEARNING_STAGE, "checkpoint": checkpoint, "done": done,
                                               "total": total})

    def _score(self, model, checkpoint: str, step: int, limit: int | None = None) -> None:
        """Score one model; a report that fails says why in the report and never stops the run."""
        started = time.monotonic()
        try:
            entry = self._reporter().score(model, checkpoint, step, limit)
            self.per_answer = (time.monotonic() - started) / max(entry.get("generated") or 1, 1)
        except Exception as error:  # noqa: BLE001 - the report is advice: the run goes on without it
            log.warning("learning report %s: not scored (%s: %s)", checkpoint, type(error).__name__, error)
            with contextlib.suppress(Exception):
                self._reporter().skip(checkpoint, step, str(msg("learning.failed", error=f"{type(error).__name__}: "
                                                                                         f"{error}")))
        finally:
            if (read_status(self.job.run_dir).get("stage") or {}).get("name") == LEARNING_STAGE:
                update_status(self.job.run_dir, stage=None)
            self.spent += time.monotonic() - started

    # ------------------------------------------------------------ the Trainer's events
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if not self.scores or model is None:
            return
        self.started, self.step_at_start = time.monotonic(), state.global_step
        try:
            has_base = self._reporter().has_base
        except Exception as error:  # noqa: BLE001 - no report (its prompts could not be read): the run goes on
            log.warning("learning report: none for this run (%s: %s)", type(error).__name__, error)
            self.off = True
            return
        if has_base:
            return
        with _adapters_off(model):
            self._score(model, BASE, 0)
        self.started, self.spent = time.monotonic(), 0.0  # the base is scored before training, outside the budget

    def on_save(self, args, state, control, model=None, **kwargs):
        if not self.scores or model is None:
            return
        name = f"checkpoint-{state.global_step}"
        if control.should_training_stop and state.global_step < state.max_steps:
            return  # a stop's save: finish() scores it once the run has ended (stopped_checkpoint)
        if state.global_step >= state.max_steps:
            return  # the last step's checkpoint holds final/'s weights: final/ is scored at the end
        if self._within_budget(state):
            self._score(model, name, state.global_step)
        else:
            self._reporter().skip(name, state.global_step, str(msg("learning.over_budget", share=BUDGET_SHARE,
                                                                    run=self.job.run_dir)))

    def _within_budget(self, state) -> bool:
        """Whether this checkpoint and final/ can both still be scored within the budget."""
        if self.per_answer is None:
            return True  # nothing scored yet in this session: its cost is what the budget learns from
        trained = max(time.monotonic() - self.started - self.spent, 1e-6)
        steps = max(state.global_step - self.step_at_start, 1)
        projected = trained / steps * max(state.max_steps - self.step_at_start, steps)
        if self.job.config.stop_when_learned and self.job.config.stage == "sft":
            projected = trained  # the learned stop may end the run at the next epoch: its steps are a ceiling
        # A checkpoint answers more prompts than the base does (its general questions are not cached).
        one = self.per_answer * self._reporter().full_count
        return self.spent + 2 * one <= BUDGET_SHARE * projected

    # ------------------------------------------------------------ the end (session.finish)
    def final(self, model, step: int) -> None:
        """Score final/ (the weights finish() saved: the best ones after an early stop). Where they are a
        checkpoint's that was scored at its save (the learned stop ends a run at an epoch's last step,
        just after its save), that entry is final/'s too: the same weights answer the same."""
        if not self.scores:
            return
        try:
            reused = self._reporter().reuse(f"checkpoint-{step}", FINAL_DIR)
        except Exception as error:  # noqa: BLE001 - the report is advice: score it instead
            log.warning("learning report final: the checkpoint's entry not reused (%s: %s)", type(error).__name__,
                        error)
            reused = None
        if reused is None:
            self._score_at_end(model, FINAL_DIR, step)

    def stopped_checkpoint(self, model, step: int) -> None:
        """A stopped run: score the checkpoint its stop saved (the weights in memory), if it has none."""
        name = f"checkpoint-{step}"
        if not self.scores or step == 0 or self._reporter().has(name):
            return
        if (self.job.run_dir / name).is_dir():
            self._score_at_end(model, name, step)

    def _score_at_end(self, model, name: str, step: int) -> None:
        """The last entry, in full unless the model answers too slowly for END_SHARE of the training
        time: then on fewer prompts, or none below MIN_PROMPTS (with the sentence why)."""
        limit = self._end_limit()
        if limit is not None and limit < MIN_PROMPTS:
            self._reporter().skip(name, step, str(msg("learning.too_slow", seconds=round(self.per_answer, 1),
                                                       run=self.job.run_dir)))
            return
        self._score(model, name, step, limit)

    def _end_limit(self) -> int | None:
        if self.per_answer is None or self.started is None:
            return None
        allowed = max(END_SHARE * (time.monotonic() - self.started - self.spent), END_FLOOR_S)
        if self.per_answer * self._reporter().full_count <= allowed:
            return None
        return int(allowed / self.per_answer)


@contextlib.contextmanager
def _adapters_off(model):
    """The base model's answers: a PeftModel's adapters disabled (new LoRA weights start as the base,
    a continued adapter does not); any other model answers as it is before its first step."""
    if hasattr(model, "disable_adapter") and hasattr(model, "peft_config"):
        with model.disable_adapter():
            yield
    else:
        yield
