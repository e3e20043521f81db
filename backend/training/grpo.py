"""stage grpo through TRL's GRPOTrainer, in the worker's lifecycle.

GRPOTrainer is a `transformers.Trainer` subclass: the run folder, checkpoints,
callbacks (markers, stop, metrics), resume and torchrun are the same as for
every stage. What it adds: for each prompt it samples `num_generations`
completions with the model itself, scores them with the rewards
(backend/training/rewards.py) and moves the model towards the completions that
scored above their group's mean.

The reference model (for the KL term, beta > 0) is the one DPO uses: the base
with the adapter disabled for a new adapter, a frozen copy of the adapter for
`init_adapter`, a second copy of the model for full fine-tuning.

Beside TRL's metrics (metrics.jsonl), each logging step writes a few sampled
completions with their rewards to completions.jsonl in the run folder:
    {"step", "prompt", "completion", "rewards": {name: value}, "reward": weighted sum}
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from backend.training.preference import REFERENCE_ADAPTER
from backend.training.rewards import completion_text, reward_functions

log = logging.getLogger("backend.train")
COMPLETIONS_FILE = "completions.jsonl"
SAMPLES_PER_LOG = 4  # completions written per logging step: one per prompt group first


def prompt_text(prompt) -> str:
    """The last user turn of a prompt (the whole text when it is not a message list)."""
    if isinstance(prompt, list):
        users = [m for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        return str((users or prompt)[-1].get("content") or "") if (users or prompt) else ""
    return str(prompt)


def samples(logs: dict, weights: list[float], step: int, count: int = SAMPLES_PER_LOG,
            group: int = 1) -> list[dict]:
    """A few of the latest generation batch's completions: the first of each prompt group, then the rest."""
    prompts, completions = list(logs["prompt"]), list(logs["completion"])
    rewards = {name: list(values) for name, values in logs["rewards"].items()}
    names = list(rewards)
    order = list(range(0, len(prompts), max(1, group))) + [i for i in range(len(prompts)) if i % max(1, group)]
    out = []
    for index in order[:count]:
        values = {name: _number(rewards[name][index]) if index < len(rewards[name]) else None for name in names}
        total = sum(w * v for w, v in zip(weights, values.values()) if v is not None)
        out.append({"step": step, "prompt": prompt_text(prompts[index]),
                    "completion": completion_text(completions[index]), "rewards": values,
                    "reward": round(total, 6)})
    return out


def _number(value):
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else round(float(value), 6)


def write_samples(run_dir: Path, records: list[dict]) -> None:
    with open(Path(run_dir) / COMPLETIONS_FILE, "a", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def grpo_trainer(config, model, arguments: dict, train_data, eval_data, tokenizer, callbacks, continued: bool):
    """TRL's GRPOTrainer over our model (already wrapped with its adapter), writing completions.jsonl."""
    import datasets
    from trl import GRPOConfig, GRPOTrainer

    datasets.disable_progress_bars()

    class StudioGRPOTrainer(GRPOTrainer):
        def log(self, logs: dict, start_time: float | None = None) -> None:
            training = self.model.training
            super().log(logs, start_time)
            if training and self.is_world_process_zero() and self._logs["prompt"] and "loss" in logs:
                write_samples(self.args.output_dir, samples(self._logs, self.reward_weights.tolist(),
                                                            self.state.global_step, group=self.num_generations))

    def count_tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    functions, weights = reward_functions(config, count_tokens)
    arguments = dict(arguments)
    arguments.pop("length_column_name", None)
    # TRL counts prompt and completion tokens itself (its batches carry no input_ids for the Trainer to count).
    arguments.update(train_sampling_strategy="random", remove_unused_columns=False, include_num_input_tokens_seen="no",
                     gradient_checkpointing=bool(arguments.get("activation_checkpointing")),
                     num_generations=config.num_generations, max_completion_length=config.max_completion_length,
                     temperature=config.temperature, beta=config.beta, loss_type=config.loss_type or "dapo",
                     reward_weights=weights, use_vllm=config.use_vllm,
                     vllm_mode="colocate", log_completions=False)
    args = GRPOConfig(**arguments)
    trainer = StudioGRPOTrainer(model=model, reward_funcs=functions, args=args, train_dataset=train_data,
                                eval_dataset=eval_data, processing_class=tokenizer, callbacks=callbacks)
    peft_model = trainer.model
    if REFERENCE_ADAPTER in getattr(peft_model, "peft_config", {}):
        if not continued:
            # A new adapter starts as the identity: its copy would equal the base, so the
            # reference pass runs with the adapter disabled instead (no copy kept or saved).
            peft_model.delete_adapter(REFERENCE_ADAPTER)
        peft_model.set_adapter("default")
    return trainer
