"""Trainer callbacks that keep the run folder safe to resume from.

CheckpointCallback  after checkpoint-<step>/ is fully written: the completion
                    marker, the best checkpoint (lowest eval_loss), and our
                    own save_total_limit rotation, done *after* the marker so
                    an interrupted save never costs the last complete one.
DiskSpaceCallback   before each save: enough free disk for one more
                    checkpoint (1.5 x the last one), else fail cleanly.
GracefulStop        SIGTERM -> at the next step boundary save and stop.
ThreadShare         between steps, this worker's CPU threads follow the other
                    live workers' claims (backend/training/threads.py).
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from pathlib import Path

import torch.distributed as dist
from transformers import TrainerCallback

from backend.messages import msg
from backend.runs.files import checkpoint_step, list_checkpoints, mark_complete, sync_run_record, update_status
from backend.training.disk import RESUME_ONLY, DiskFullError, folder_size, human_bytes
from backend.training.errors import DivergedError
from backend.training.threads import ThreadRebalance

log = logging.getLogger("backend.train")


def _barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


class CheckpointCallback(TrainerCallback):
    def __init__(self, run_dir: Path, save_total_limit: int | None):
        self.run_dir = Path(run_dir)
        self.save_total_limit = save_total_limit
        self.eval_loss_at: dict[int, float] = {}
        self.best: tuple[int, float] | None = None  # (step, eval_loss) of the best complete checkpoint

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if metrics and "eval_loss" in metrics:
            self.eval_loss_at[state.global_step] = float(metrics["eval_loss"])

    def on_save(self, args, state, control, **kwargs):
        _barrier()  # every rank has written its part (rng_state_<rank>.pth) before the marker
        if state.is_world_process_zero:
            folder = self.run_dir / f"checkpoint-{state.global_step}"
            sync_run_record(self.run_dir)  # the log and metrics up to this checkpoint, before its marker
            mark_complete(folder)
            loss = self.eval_loss_at.get(state.global_step)
            # A NaN is never the best: NaN < x is False, but a first NaN would have become the best.
            if loss is not None and math.isfinite(loss) and (self.best is None or loss < self.best[1]):
                self.best = (state.global_step, loss)
            self._rotate()
            log.info("saved %s", folder.name)
        _barrier()

    def _rotate(self) -> None:
        """Delete the oldest complete checkpoints beyond the limit, never the best
        nor the newest. Incomplete folders are left for resume to skip."""
        if not self.save_total_limit:
            return
        complete = list_checkpoints(self.run_dir)
        best = self.run_dir / f"checkpoint-{self.best[0]}" if self.best else None
        keep = set(complete[-self.save_total_limit:])
        if best in complete and best not in keep:
            # The newest is what resume needs, the best is what the user wants: keep both.
            keep = {*complete[-max(self.save_total_limit - 1, 1):], best}
        for folder in complete:
            if folder not in keep:
                shutil.rmtree(folder, ignore_errors=True)

    def restore(self, trainer_state_best: tuple[int, float] | None, history: list[dict]) -> None:
        """On resume: eval losses and the best checkpoint from trainer_state.json."""
        for entry in history:
            if "eval_loss" in entry:
                self.eval_loss_at[int(entry["step"])] = float(entry["eval_loss"])
        steps = {checkpoint_step(c) for c in list_checkpoints(self.run_dir)}
        scored = [(s, v) for s, v in self.eval_loss_at.items() if s in steps and math.isfinite(v)]
        self.best = min(scored, key=lambda sv: sv[1]) if scored else trainer_state_best


class DiskSpaceCallback(TrainerCallback):
    """Runs after DefaultFlowCallback in the same on_step_end, so should_save is already decided."""

    def __init__(self, run_dir: Path, first_estimate_bytes: int):
        self.run_dir = Path(run_dir)
        self.first_estimate = first_estimate_bytes

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_save and state.is_world_process_zero:
            self.check()
        return control

    def needed_bytes(self, final: bool = False) -> int:
        """1.5 x the last checkpoint (final/: without the optimizer and resume files)."""
        existing = list_checkpoints(self.run_dir)
        skip = RESUME_ONLY if final else ()
        size = folder_size(existing[-1], skip) if existing else self.first_estimate
        return int(size * 1.5)

    def check(self, final: bool = False) -> None:
        free = shutil.disk_usage(self.run_dir).free
        needed = self.needed_bytes(final)
        if free < needed:
            what = "final/ (the trained model)" if final else "a checkpoint"
            raise DiskFullError(f"only {human_bytes(free)} free for {self.run_dir.name}, and {what} needs about "
                                f"{human_bytes(needed)}")


class FiniteLoss(TrainerCallback):
    """Stops the run as failed at the first loss that is not a finite number: a logged step's, the
    run's closing train_loss (a run shorter than logging_steps logs no step at all), or an evaluation's
    eval_loss. The Trainer would otherwise train on and end `completed` with NaN weights. Logged and
    evaluated values are the same on every rank (gathered), so all ranks raise together."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        values = [("loss", logs.get("loss")), ("train_loss", logs.get("train_loss"))]
        if not args.fp16:   # fp16's loss scaler skips steps with inf gradients on purpose: not a divergence
            values.append(("grad_norm", logs.get("grad_norm")))
        self._check(values, args, state)
        return control

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self._check([("eval_loss", (metrics or {}).get("eval_loss"))], args, state)
        return control

    @staticmethod
    def _check(values, args, state) -> None:
        for name, value in values:
            if isinstance(value, float) and not math.isfinite(value):
                raise DivergedError(msg("train.error.not_finite", what=name, value=value, step=state.global_step,
                                        lr=args.learning_rate))


class GracefulStop(TrainerCallback):
    """At the step boundary after SIGTERM (a StopRequest), every rank saves and stops together. When the
    first step begins, a stop stops ending the run at once (StopRequest.end_at_once) and waits for that
    step's checkpoint instead; rank 0 records the moment (`first_step_at`), which Stop's sentence reads."""

    def __init__(self, request, run_dir: Path | None = None):
        self.request, self.run_dir, self.begun = request, run_dir, False

    def on_step_begin(self, args, state, control, **kwargs):
        if not self.begun:
            self.begun = True
            self.request.end_at_once = False  # from now on a stop saves this step's checkpoint
            if self.run_dir is not None:
                update_status(self.run_dir, first_step_at=time.time())
        return control

    def _agreed(self) -> bool:
        # Under torchrun the ranks may see the signal at different steps: agree on the flag.
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            import torch

            flag = torch.tensor([1 if self.request.requested else 0])
            if dist.get_backend() == "nccl":
                flag = flag.cuda()
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            agreed = bool(flag.item())  # returned as is: a request read again could differ between ranks
            self.request.requested = agreed
            return agreed
        return self.request.requested

    def on_step_end(self, args, state, control, **kwargs):
        if self._agreed():
            if not control.should_training_stop:
                log.info("stop requested: saving a checkpoint at step %d", state.global_step)
            control.should_save = True
            control.should_training_stop = True
        return control


class ThreadShare(TrainerCallback):
    """Gives CPU threads back while other training processes claim them, and takes them again after."""

    def __init__(self, rebalance: ThreadRebalance | None = None):
        self.rebalance = rebalance or ThreadRebalance()

    def on_step_end(self, args, state, control, **kwargs):
        self.rebalance.maybe()
        return control
