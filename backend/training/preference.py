"""Preference stages (dpo / orpo / simpo / kto) with TRL's trainers.

TRL's trainers are `transformers.Trainer` subclasses, so the worker keeps its
lifecycle: the same TrainingArguments values (run folder, checkpoints, eval,
DDP, precision) go into TRL's config class, the same callbacks (markers, stop,
metrics) are attached, and resume is the Trainer's own.

The reference model (dpo, kto):
* a new LoRA / QLoRA adapter: the base with the adapter disabled; no copy;
* `init_adapter` (an SFT run's adapter, continued): TRL keeps a frozen copy of
  that adapter named "ref" (adapter weights only, not the model), so the
  reference is the SFT model the run starts from;
* full fine-tuning: TRL loads a second, frozen copy of the model.
orpo and simpo need no reference.
"""

from __future__ import annotations

import logging
from pathlib import Path

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.data.pair_rows import CUT, EMPTY, SAME, left_out, measure, stage_rows
from backend.data.resolve import load_rows, resolve_dataset, run_split
from backend.messages import Message, msg
from backend.runs.workspace import Workspace
from backend.training.dataset import RowCounts
from backend.training.pair_tokens import counting_pair_tokens

log = logging.getLogger("backend.train")
REFERENCE_ADAPTER = "ref"


def usable(tokenizer, rows: list[dict], config: RunConfig, counts: RowCounts) -> list[dict]:
    """The rows that train (backend/data/pair_rows.py: the rule the check and the Plan apply too);
    counts the left-out ones by reason and the ones cut to cutoff_len."""
    kept = []
    for row, tokens in zip(rows, measure(tokenizer, rows)):
        counts.total += 1
        reason = left_out(tokens, config.cutoff_len)
        if reason:
            counts.drop(reason)
            continue
        counts.truncated += tokens.longest > config.cutoff_len
        kept.append(row)
    return kept


def no_pairs_left(counts: RowCounts, config: RunConfig) -> Message:
    """Why nothing is left to train on, with what to do about the commonest reason."""
    reasons = ", ".join(f"{count} {reason}" for reason, count in counts.reasons.items()) or "no usable row"
    commonest = max(counts.reasons, key=counts.reasons.get) if counts.reasons else None
    advice = {EMPTY: msg("train.pairs.empty"), SAME: msg("train.pairs.same"),
              CUT: msg("train.pairs.cutoff", cutoff=config.cutoff_len)}.get(commonest, msg("train.pairs.none"))
    return msg("train.no_pairs", total=counts.total, reasons=reasons, advice=advice)


def build_preference_datasets(tokenizer, config: RunConfig, workspace: Workspace):
    """(train Dataset, eval Dataset or None, RowCounts) in TRL's conversational form."""
    from datasets import Dataset

    counts = RowCounts()
    source = resolve_dataset(config.dataset, workspace)
    rows, eval_rows = run_split(*load_rows(source, counts, config.dataset_name), config, config.dataset)
    train = usable(tokenizer, stage_rows(rows, config.stage, config.dataset), config, counts)
    evaluation = usable(tokenizer, stage_rows(eval_rows, config.stage, config.dataset), config, counts) \
        if eval_rows else []
    counts.train, counts.eval = len(train), len(evaluation)
    if not train:
        raise ConfigError(no_pairs_left(counts, config))
    return Dataset.from_list(train), (Dataset.from_list(evaluation) if evaluation else None), counts


def init_adapter_dir(config: RunConfig, workspace: Workspace) -> Path | None:
    """`init_adapter` as a folder holding adapter_config.json (a run folder means its final/)."""
    if not config.init_adapter:
        return None
    path = Path(config.init_adapter).expanduser()
    if not path.is_absolute() and not path.exists():
        path = workspace.runs_dir / config.init_adapter
    if (path / "final" / "adapter_config.json").is_file():
        path = path / "final"
    if not (path / "adapter_config.json").is_file():
        raise ConfigError(f"init_adapter {config.init_adapter!r} is not an adapter folder (no adapter_config.json "
                          f"in {path}); give an SFT run's final/ or checkpoint-N of a LoRA run.")
    return path


def continue_adapter(model, adapter: Path):
    """The SFT adapter loaded as the trainable "default" adapter (docs/LIBRARY_TRAPS.md, checkpoints and resume)."""
    from peft import PeftModel

    return PeftModel.from_pretrained(model, str(adapter), is_trainable=True)


def preference_trainer(config: RunConfig, model, arguments: dict, train_data, eval_data, tokenizer, callbacks,
                       continued: bool):
    """The stage's TRL trainer over our model (already wrapped with its adapter)."""
    import datasets

    datasets.disable_progress_bars()  # TRL's tokenising bars would fill train.log
    config_class, trainer_class, extra = _stage(config)
    trainer_class = counting_pair_tokens(trainer_class)  # ORPO / SimPO batches have no input_ids to count
    arguments = dict(arguments)
    # TRL's rows carry no "length" column, and KTO pairs each row with its batch neighbours.
    arguments.update(train_sampling_strategy="sequential" if config.stage == "kto" else "random",
                     remove_unused_columns=True, max_length=config.cutoff_len,
                     gradient_checkpointing=config.gradient_checkpointing)
    arguments.pop("length_column_name", None)
    args = config_class(**arguments, **extra)
    trainer = trainer_class(model=model, args=args, train_dataset=train_data, eval_dataset=eval_data,
                            processing_class=tokenizer, callbacks=callbacks)
    peft_model = trainer.model
    if not continued and REFERENCE_ADAPTER in getattr(peft_model, "peft_config", {}):
        # A new adapter starts as the identity: its copy would equal the base, so the
        # reference pass runs with the adapter disabled instead (no copy kept or saved).
        peft_model.delete_adapter(REFERENCE_ADAPTER)
        peft_model.set_adapter("default")
    if continued and REFERENCE_ADAPTER in getattr(peft_model, "peft_config", {}):
        peft_model.set_adapter("default")
    return trainer


def _stage(config: RunConfig):
    if config.stage == "dpo":
        from trl import DPOConfig, DPOTrainer

        losses, weights = [config.loss_type or "sigmoid"], None
        if config.rpo_alpha:  # RPO: TRL 1.16 adds the chosen answers' NLL as a second loss ("sft")
            losses, weights = [*losses, "sft"], [1.0, config.rpo_alpha]
        return DPOConfig, DPOTrainer, dict(beta=config.beta, loss_type=losses, loss_weights=weights,
                                           label_smoothing=config.label_smoothing,
                                           precompute_ref_log_probs=config.precompute_ref_log_probs)
    if config.stage == "kto":
        from trl import KTOConfig, KTOTrainer

        return KTOConfig, KTOTrainer, dict(beta=config.beta, loss_type=config.loss_type or "kto",
                                           desirable_weight=config.desirable_weight,
                                           undesirable_weight=config.undesirable_weight)
    if config.stage == "orpo":
        from trl.experimental.orpo import ORPOConfig, ORPOTrainer

        return ORPOConfig, ORPOTrainer, dict(beta=config.beta)
    from trl.experimental.cpo import CPOConfig, CPOTrainer

    # SimPO = CPO's "simpo" loss without its behaviour-cloning term (cpo_alpha 0).
    return CPOConfig, CPOTrainer, dict(loss_type="simpo", cpo_alpha=0.0, beta=config.beta,
                                       simpo_gamma=config.simpo_gamma, label_smoothing=config.label_smoothing)
