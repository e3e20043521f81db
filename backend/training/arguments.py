"""RunConfig -> transformers TrainingArguments.

Each field's metadata says how it gets here (backend/config_policy.py): copied
under a TrainingArguments name, or converted by CONVERTERS below; the rest are
fixed choices of the app. Deliberate choices:
* save_total_limit is *not* handed to the Trainer: CheckpointCallback rotates
  after the completion marker is written, so a crash mid-save never deletes
  the last complete checkpoint first.
* The best checkpoint is tracked on eval_loss (metric_for_best_model) without
  load_best_model_at_end, which would reload weights behind the markers' back;
  summary.json names the best checkpoint instead.
* Packed batches (backend/training/packing.py) or, where packing is not
  supported, length-grouped sampling + PadToLongest: no or little padding.
* optim "auto" resolves to torch's fused AdamW on CUDA (plain AdamW on the CPU); gradient_checkpointing "auto"
  is resolved by the session (memory estimate) and passed in as a bool.
* Non-padding tokens are counted by the Trainer (include_num_input_tokens_seen)
  so tokens/s is comparable across runs and processes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from backend.config import RunConfig
from backend.config_policy import CONVERTED, COPIED
from backend.scale.engines import parallel_arguments


def resolve_optimizer(optim: str, on_cpu: bool) -> str:
    """optim "auto": AdamW fused into one kernel (torch's fused=True) on a CUDA GPU; the plain
    loop elsewhere (on the CPU it measured faster than fused for LoRA: docs/BENCHMARKS.md)."""
    if optim != "auto":
        return optim
    return "adamw_torch_fused" if not on_cpu and torch.cuda.is_available() else "adamw_torch"


@dataclass(frozen=True)
class RunFacts:
    """What the session resolved before the arguments are built."""
    precision: str        # auto resolved against the devices: bf16 | fp16 | fp32
    has_eval: bool
    on_cpu: bool
    world_size: int
    checkpointing: bool   # gradient_checkpointing resolved (auto -> bool)


# The fields whose metadata says `converted(...)`: each turns into the TrainingArguments named there.
CONVERTERS: dict[str, Callable[[RunConfig, RunFacts], dict]] = {
    "group_by_length": lambda c, run: {"train_sampling_strategy": "group_by_length" if c.group_by_length else "random"},
    # DDP: the frozen base of an adapter run has no gradients by design, not by mistake.
    "method": lambda c, run: {"ddp_find_unused_parameters": False if c.method != "full" else None},
    "precision": lambda c, run: {"bf16": run.precision == "bf16", "fp16": run.precision == "fp16"},
    # transformers 5 names gradient checkpointing "activation checkpointing".
    "gradient_checkpointing": lambda c, run: {
        "activation_checkpointing": run.checkpointing,
        "activation_checkpointing_kwargs": {"use_reentrant": False} if run.checkpointing else None},
    "optim": lambda c, run: {"optim": resolve_optimizer(c.optim, run.on_cpu)},
    "eval_steps": lambda c, run: {"eval_steps": (c.eval_steps or c.save_steps) if run.has_eval else None},
    "report_to": lambda c, run: {"report_to": [] if c.report_to == "none" else [c.report_to]},
}


def argument_values(config: RunConfig, run_dir: Path, run: RunFacts, layer_classes: list[str] | None = None) -> dict:
    """The TrainingArguments keywords of a run, built from each field's metadata (copied or
    CONVERTERS), sharding engine included (backend.scale.engines: FSDP2 needs `layer_classes`,
    the decoder-layer class names); the preference stages hand them to TRL's config classes."""
    kwargs = dict(
        output_dir=str(run_dir),
        use_cpu=run.on_cpu,
        # DDP across CPU processes needs gloo; set only under torchrun (a lone process must not init one).
        ddp_backend="gloo" if run.world_size > 1 and (run.on_cpu or not torch.cuda.is_available()) else None,
        logging_first_step=True,
        save_strategy="steps",
        save_total_limit=None,
        eval_strategy="steps" if run.has_eval else "no",
        metric_for_best_model="eval_loss" if run.has_eval else None,
        greater_is_better=False if run.has_eval else None,
        load_best_model_at_end=False,
        length_column_name="length",
        remove_unused_columns=False,  # the collator drops "length" itself; the sampler reads it
        include_num_input_tokens_seen="non_padding",
        disable_tqdm=True,  # train.log gets one readable line per logging step instead
        # A NaN / inf loss is logged as it is (the Trainer would log an average of the finite ones, 0.0
        # after a reset), so the charts show it and FiniteLoss (callbacks.py) stops the run on it.
        logging_nan_inf_filter=False,
    )
    for f in dataclasses.fields(config):
        way = f.metadata["trainer"]
        if way.way == COPIED:  # e.g. warmup_ratio -> warmup_steps: transformers 5 reads a float < 1 as a ratio
            kwargs.update((name, getattr(config, f.name)) for name in way.names)
        elif way.way == CONVERTED:
            kwargs.update(CONVERTERS[f.name](config, run))
    kwargs.update(parallel_arguments(config, layer_classes or []))  # the SCALE fields
    if kwargs.get("fsdp"):  # FSDP checkpoints activations itself (fsdp_config)
        kwargs.update(activation_checkpointing=False, activation_checkpointing_kwargs=None)
    if config.report_to == "tensorboard":
        # TensorBoardCallback reads its folder from the environment (transformers 5).
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(run_dir / "tensorboard")
    return kwargs
