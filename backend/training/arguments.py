"""RunConfig -> transformers TrainingArguments.

Deliberate choices:
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

import os
from pathlib import Path

import torch
from transformers import TrainingArguments

from backend.config import RunConfig
from backend.scale.engines import parallel_arguments


def resolve_optimizer(optim: str, on_cpu: bool) -> str:
    """optim "auto": AdamW fused into one kernel (torch's fused=True) on a CUDA GPU; the plain
    loop elsewhere (on the CPU it measured faster than fused for LoRA: docs/BENCHMARKS.md)."""
    if optim != "auto":
        return optim
    return "adamw_torch_fused" if not on_cpu and torch.cuda.is_available() else "adamw_torch"


def training_arguments(config: RunConfig, run_dir: Path, precision: str, has_eval: bool,
                       on_cpu: bool, world_size: int = 1, layer_classes: list[str] | None = None,
                       checkpointing: bool = False) -> TrainingArguments:
    return TrainingArguments(**argument_values(config, run_dir, precision, has_eval, on_cpu, world_size, layer_classes,
                                               checkpointing))


def argument_values(config: RunConfig, run_dir: Path, precision: str, has_eval: bool,
                    on_cpu: bool, world_size: int = 1, layer_classes: list[str] | None = None,
                    checkpointing: bool = False) -> dict:
    """The TrainingArguments keywords of a run, sharding engine included (backend.scale.engines:
    FSDP2 needs `layer_classes`, the decoder-layer class names); the preference stages hand
    them to TRL's config classes. `checkpointing`: gradient_checkpointing resolved (auto -> bool)."""
    eval_steps = config.eval_steps or config.save_steps
    kwargs = dict(
        output_dir=str(run_dir),
        seed=config.seed,
        data_seed=config.seed,
        learning_rate=config.learning_rate,
        num_train_epochs=config.num_train_epochs,
        max_steps=config.max_steps,
        per_device_train_batch_size=config.per_device_train_batch_size,
        per_device_eval_batch_size=config.per_device_eval_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        optim=resolve_optimizer(config.optim, on_cpu),
        torch_compile=config.torch_compile,
        use_liger_kernel=config.use_liger_kernel,
        lr_scheduler_type=config.lr_scheduler_type,
        warmup_steps=config.warmup_ratio,  # transformers 5: a float < 1 is a ratio of the total steps
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        # transformers 5 names gradient checkpointing "activation checkpointing".
        activation_checkpointing=checkpointing,
        activation_checkpointing_kwargs={"use_reentrant": False} if checkpointing else None,
        neftune_noise_alpha=config.neftune_noise_alpha,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        use_cpu=on_cpu,
        # DDP across CPU processes needs gloo; set only under torchrun (a lone process must not init one).
        ddp_backend="gloo" if world_size > 1 and (on_cpu or not torch.cuda.is_available()) else None,
        ddp_find_unused_parameters=False if config.method != "full" else None,
        logging_steps=config.logging_steps,
        logging_first_step=True,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=None,
        eval_strategy="steps" if has_eval else "no",
        eval_steps=eval_steps if has_eval else None,
        metric_for_best_model="eval_loss" if has_eval else None,
        greater_is_better=False if has_eval else None,
        load_best_model_at_end=False,
        train_sampling_strategy="group_by_length" if config.group_by_length else "random",
        length_column_name="length",
        remove_unused_columns=False,  # the collator drops "length" itself; the sampler reads it
        include_num_input_tokens_seen="non_padding",
        dataloader_num_workers=config.dataloader_num_workers,
        report_to=[] if config.report_to == "none" else [config.report_to],
        run_name=config.run_name,
        disable_tqdm=True,  # train.log gets one readable line per logging step instead
    )
    kwargs.update(parallel_arguments(config, layer_classes or []))
    if kwargs.get("fsdp"):  # FSDP checkpoints activations itself (fsdp_config)
        kwargs.update(activation_checkpointing=False, activation_checkpointing_kwargs=None)
    if config.report_to == "tensorboard":
        # TensorBoardCallback reads its folder from the environment (transformers 5).
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(run_dir / "tensorboard")
    return kwargs
