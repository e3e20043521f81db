"""Parts of the training worker (`python -m backend.train`).

dataset.py    canonical rows -> encoded train / eval datasets (split, overflow)
collator.py   dynamic padding to the longest row of a length-grouped batch
packing.py    padding-free packed batches, and the check that they are exact for a model
loss.py       chunked cross-entropy on labelled positions (no full-vocabulary logits kept)
trainer.py    StudioTrainer: the Trainer with that loss and packed-token counting
speed.py      per-run choices: packed or padded batches, gradient checkpointing auto
model.py      base model + LoRA / QLoRA / full set-up
arguments.py  RunConfig -> transformers TrainingArguments
callbacks.py  checkpoint markers + rotation, graceful stop, disk check
metrics_log.py metrics.jsonl lines (the documented shape, grad-norm heatmap data)
cli.py        command line, run folder, resume reconciliation, logging, SIGTERM flag
worker.py     the worker's path for one run: prepare, run folder, mark running, train, finish or fail
              (backend/train.py and the speed probe take it alike)
session.py    lifecycle: build (tokenizer, data, model, Trainer), train / resume, finish
errors.py     exceptions -> one sentence + advice + exit code; failed status
summary.py    summary.json
model_stage.py a model's first build in the background at app start; the worker's end on a Stop during a build
replay.py     the base model's own answers to general prompts, mixed into small sets (cached per model)
replay_lock.py the replay cache's lock: whoever waits on it hears whose it is and how far it is
preference.py the preference stages (dpo / orpo / simpo / kto) through TRL's trainers
grpo.py       stage grpo through TRL's GRPOTrainer; completions.jsonl
grpo_data.py  grpo's prompts and reference answers from any instruction data (or prompts alone)
rewards.py    grpo's reward presets, the user's reward functions and their checks
grpo_signal.py a grpo run whose groups all score alike (nothing to learn from) says so
reward_probe.py the user's reward functions checked in a child process (the Train tab's Plan)
disk.py       a full disk recognised whatever raised it; partial folders removed
threads.py    the worker's share of the CPU cores
plan_check.py warnings for absurd plans (steps, then time after the first step)
estimate.py   how long a run will train before it starts (earlier runs, a speed probe, or FLOPs), with a range
speed_probe.py a few real steps of a config in a scratch folder, timed (the Plan's Measure speed)
dry_run.py    --dry-run: the start's checks, the steps and the estimate; nothing trains
ray_run.py    the Ray driver: the same session inside ray.train.torch.TorchTrainer's workers
ray_log.py    Ray's own output into the run's ray.log, so train.log stays the user's
"""
