"""A TrainerCallback the run-store tests load into the real worker through
RunConfig.callbacks (the user-callback feature), so a test can act while the
worker is provably mid-run, with no timing guesses.

While RUN_DIR/.hold exists, the worker waits at the end of each step from
step HOLD_FROM_STEP on (after checkpoint-2 is complete with save_steps=2),
and says so in RUN_DIR/.held. Signals still reach it while it waits."""

from __future__ import annotations

import time
from pathlib import Path

from transformers import TrainerCallback

HOLD_FROM_STEP = 3


class HoldWhileFileExists(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        run_dir = Path(args.output_dir)
        if state.global_step < HOLD_FROM_STEP or not (run_dir / ".hold").exists():
            return control
        (run_dir / ".held").write_text(str(state.global_step))
        while (run_dir / ".hold").exists():
            time.sleep(0.05)
        return control


class HoldBeforeFirstStep(TrainerCallback):
    """While RUN_DIR/.hold-start exists, the worker waits when training begins, before its first step
    (the model and the data loaded, no step begun), and says so in RUN_DIR/.held-start."""

    def on_train_begin(self, args, state, control, **kwargs):
        run_dir = Path(args.output_dir)
        if (run_dir / ".hold-start").exists():
            (run_dir / ".held-start").touch()
        while (run_dir / ".hold-start").exists():
            time.sleep(0.05)
        return control


class FillDiskAtTrainEnd(TrainerCallback):
    """When training ends (before the worker writes final/), fill the disk of
    the run folder until only LEAVE_BYTES are free, as another program could.
    Only while RUN_DIR/.fill exists; the filler file is RUN_DIR/../.filler."""

    LEAVE_BYTES = 64 * 1024

    def on_train_end(self, args, state, control, **kwargs):

        run_dir = Path(args.output_dir)
        if (run_dir / ".fill").exists():
            fill_disk(run_dir.parent / ".filler", self.LEAVE_BYTES)
        return control


def fill_disk(path: Path, leave_bytes: int) -> None:
    import os

    stat = os.statvfs(path.parent)
    with open(path, "wb") as handle:
        handle.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - leave_bytes))
        handle.flush()
        os.fsync(handle.fileno())


class RecordModel(TrainerCallback):
    """Writes RUN_DIR/model.json when training begins: what the worker really
    trains (module classes, LoRA scalings, NEFTune), for the suite to assert on."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        import json

        classes = sorted({type(m).__name__ for m in model.modules()})
        scalings = sorted({float(s) for m in model.modules() if isinstance(getattr(m, "scaling", None), dict)
                           for s in m.scaling.values()})  # peft LoRA layers: adapter name -> scale
        embeddings = model.get_input_embeddings()
        hooks = [str(h) for h in getattr(embeddings, "_forward_hooks", {}).values()]
        record = {"classes": classes, "scalings": scalings,
                  "neftune_noise_alpha": getattr(embeddings, "neftune_noise_alpha", None),
                  "neftune_hooks": [h for h in hooks if "neftune" in h]}
        (Path(args.output_dir) / "model.json").write_text(json.dumps(record))
        return control


class AskForImpossibleMemory(TrainerCallback):
    """At the first step, asks torch's CPU allocator for a 1 PiB tensor: malloc fails at once
    (no page is touched), and the worker meets the allocator's real "can't allocate memory"."""

    def on_step_begin(self, args, state, control, **kwargs):
        import torch

        torch.empty(2**50, dtype=torch.uint8)
        return control


def offset_loss(outputs, labels, num_items_in_batch=None):
    """The documented example loss plus 1000: a logged loss above 1000 proves the
    worker trained with this function (the model's own loss is about 8 here)."""
    from examples.custom_training import label_smoothed_loss

    return label_smoothed_loss(outputs, labels, num_items_in_batch) + 1000.0


# What libraries write while a run trains, through the channels they write it on (a Python warning,
# transformers' logger, a logger without handlers as bitsandbytes' is), and one line of the project's.
LIBRARY_LINES = {"warning": "a library's FutureWarning, once per run",
                 "transformers": "Token indices sequence length is longer than the specified maximum",
                 "bitsandbytes": "Failed to load CPU gemm_4bit_forward from kernels-community"}
PROJECT_LINE = "a line of the project's own"


class LibraryLines(TrainerCallback):
    def on_train_begin(self, args, state, control, **kwargs):
        import logging
        import warnings

        from transformers.utils import logging as hf_logging

        warnings.warn(LIBRARY_LINES["warning"], FutureWarning, stacklevel=1)
        hf_logging.get_logger("transformers.tokenization_utils_base").warning(LIBRARY_LINES["transformers"])
        logging.getLogger("bitsandbytes.backends.cpu.ops").warning(LIBRARY_LINES["bitsandbytes"])
        logging.getLogger("backend.train").warning(PROJECT_LINE)
        return control
