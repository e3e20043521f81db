"""Early stopping that says why the run ended and which weights final/ holds.

transformers' EarlyStoppingCallback stops silently and expects
load_best_model_at_end to put the best weights back; that reload would bypass
the completion markers, so the run keeps load_best_model_at_end off and
finish() saves the best complete checkpoint's weights as final/ itself
(`best_weights`)."""

from __future__ import annotations

import logging
from pathlib import Path

from transformers import EarlyStoppingCallback

log = logging.getLogger("backend.train")


class EarlyStop(EarlyStoppingCallback):
    def __init__(self, patience: int, threshold: float):
        super().__init__(patience, threshold)
        self.stopped_at: int | None = None  # the step whose evaluation ended the run

    def on_train_begin(self, args, state, control, **kwargs):
        # Not the parent's warning that the best model will not be loaded: finish() loads it.
        # Its asserts hold by construction (metric_for_best_model eval_loss, an eval split).
        return control

    def on_evaluate(self, args, state, control, metrics, **kwargs):
        best = state.best_metric  # the Trainer updates it after this callback: still the best before
        super().on_evaluate(args, state, control, metrics, **kwargs)
        if self.early_stopping_patience_counter >= self.early_stopping_patience and self.stopped_at is None:
            self.stopped_at = state.global_step
            log.info("early stopping at step %d of %d: eval_loss %.4f has not improved on the best %.4f by more "
                     "than %g for %d evaluation(s) (early_stopping_patience %d)", state.global_step,
                     state.max_steps, metrics.get("eval_loss", float("nan")), best if best is not None else float("nan"),
                     self.early_stopping_threshold, self.early_stopping_patience_counter, self.early_stopping_patience)


def early_stop_of(trainer) -> EarlyStop | None:
    return next((c for c in trainer.callback_handler.callbacks if isinstance(c, EarlyStop)), None)


def best_weights(trainer, run_dir: Path, best: tuple[int, float] | None) -> int:
    """Before final/ is saved: after an early stop, load the best complete checkpoint's weights
    (the lowest eval_loss, the one summary.json names) into the model. Returns the step whose
    weights final/ will hold."""
    step = trainer.state.global_step
    stop = early_stop_of(trainer)
    if stop is None or stop.stopped_at is None:
        return step
    if best is None:
        log.info("final/ holds the weights of step %d, the last one: no saved checkpoint has an eval_loss "
                 "(save_steps and eval_steps do not meet)", step)
        return step
    if best[0] == step:
        log.info("final/ holds the weights of step %d, which has the best eval_loss (%.4f)", step, best[1])
        return step
    trainer._load_from_checkpoint(str(Path(run_dir) / f"checkpoint-{best[0]}"))  # every rank: its model
    log.info("final/ holds checkpoint-%d, the best eval_loss (%.4f), not the weights of step %d where training "
             "stopped", best[0], best[1], step)
    return best[0]
