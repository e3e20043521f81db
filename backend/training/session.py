"""The worker's lifecycle: build (tokenizer, data, model, Trainer), train or
resume, then finish (final/, summary.json, status.json) or fail."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from transformers import PrinterCallback, Trainer, TrainerState, TrainingArguments, set_seed

from backend.config import WARMUP_MIN_STEPS, derived_numbers, import_reference
from backend.config_policy import ConfigError
from backend.data.resolve import resolve_dataset
from backend.messages import msg
from backend.models.chat_templates import apply_for_model
from backend.models.hardware import training_devices
from backend.models.loading import has_own_chat_template, load_tokenizer, model_context_length, needs_build
from backend.models.memory import step_row_tokens
from backend.runs.files import (
    FINAL_DIR,
    METRICS_FILE,
    append_metrics,
    checkpoint_step,
    mark_complete,
    read_status,
    update_status,
)
from backend.runs.model_builds import BuildStopped, prepare_model
from backend.runs.speed_log import read_lines, record_speed, speed_profile
from backend.scale.engines import decoder_layer_classes
from backend.training.arguments import RunFacts, argument_values
from backend.training.callbacks import (
    CheckpointCallback,
    DiskSpaceCallback,
    FiniteLoss,
    GracefulStop,
    ThreadShare,
    _barrier,
)
from backend.training.cli import (
    Job,
    StoppedBeforeFirstStep,
    StopRequest,
    check_model,
    choose_devices,
    shared_devices_warning,
)
from backend.training.dataset import RowCounts, build_datasets
from backend.training.disk import remove_partial_saves
from backend.training.early_stop import EarlyStop, best_weights, early_stop_of
from backend.training.estimate import estimate_run_seconds
from backend.training.grpo_data import build_grpo_datasets
from backend.training.grpo_signal import GroupSignalCheck
from backend.training.learned_stop import LearnedStop, learned_stop_of
from backend.training.learning_callback import LearningReport
from backend.training.library_logs import route_transformers_logs
from backend.training.metrics_log import MetricsCallback
from backend.training.model import attention_implementation, build_model, parameter_counts
from backend.training.packing import PackedCollator
from backend.training.plan_check import PlanCheck, steps_warning
from backend.training.replay import REPLAY_STAGE, REPLAY_WAIT_STAGES, replay_applies, replay_count, replay_rows
from backend.training.speed import checkpointing_for, collator_for
from backend.training.summary import RunClock, write_summary
from backend.training.threads import limit_threads
from backend.training.trainer import StudioTrainer, choose_loss

log = logging.getLogger("backend.train")
SHARDED_WEIGHTS = ("fsdp", "deepspeed_zero3")  # distributed settings under which no rank holds the whole model


@dataclass
class Session:
    job: Job
    trainer: Trainer
    counts: RowCounts
    precision: str
    checkpoints: CheckpointCallback
    parameters: dict
    clock: RunClock
    disk: DiskSpaceCallback | None = None
    output: object = None  # TrainOutput of trainer.train()
    learning: LearningReport | None = None  # the learning report's callback (learning_report on)


def resolve_model(job: Job, stop: StopRequest | None = None) -> str:
    # The demo model and GGUF sources are built or converted on first use: a stage with its own progress.
    name, models_dir = job.config.model_name_or_path, job.workspace.models_dir
    building = needs_build(name, models_dir)
    try:
        path = prepare_model(name, models_dir, job.run_dir if job.is_main else None,
                             should_stop=(lambda: stop.requested) if stop else None)
    except StoppedBeforeFirstStep:
        if building:  # the run's end says it stopped in the build (start again to build it)
            raise BuildStopped from None
        raise
    check_model(job.config, path)
    return path


def _replay_source(config, model_path: str, tokenizer, job: Job):
    """replay(train_rows) -> the replay rows for this run (none when it does not apply)."""

    # The model's own template, as the Train tab's Plan asks it: the tokenizer here already holds the
    # run's template (a base model gets Gemma's, ChatML ...), which says nothing about the model's answers.
    own = has_own_chat_template(config.model_name_or_path, job.workspace.models_dir)

    def progress(done: int, total: int) -> None:  # a stage with its bar in the Runs tab, as the conversion has
        if job.is_main:
            update_status(job.run_dir, stage={"name": REPLAY_STAGE, "done": done, "total": total})

    def waiting(holder: dict) -> None:  # another process answers the same prompts: whose, and how far
        if job.is_main:
            owner = holder.get("owner")
            update_status(job.run_dir, stage={"name": REPLAY_WAIT_STAGES[bool(owner)], "holder": owner,
                                              "done": holder.get("done") or 0, "total": holder.get("total")})

    def replay(train_rows: int) -> list[dict]:
        if not replay_applies(config, train_rows, own):
            return []
        try:
            return replay_rows(model_path, tokenizer, job.workspace.datasets_dir, replay_count(config, train_rows),
                               config.seed, progress=progress, owner=job.run_dir.name if job.run_dir else None,
                               waiting=waiting)
        finally:
            stage = (read_status(job.run_dir).get("stage") or {}).get("name") if job.is_main else None
            if stage in (REPLAY_STAGE, *REPLAY_WAIT_STAGES):
                update_status(job.run_dir, stage=None)
    return replay


@dataclass
class _Rows:
    """The run's encoded rows, and for a preference stage the adapter it continues (None: a new one)."""
    train: object
    eval: object | None
    counts: RowCounts
    adapter: object = None


def build(job: Job, stop: StopRequest, extra_callbacks: tuple = ()) -> Session:
    """The run's Trainer, step by step. Cheap checks that can fail come before slow loading, and
    each step comes before the first one that needs what it sets."""
    config = job.config
    route_transformers_logs()  # its warnings to debug.log, beside the other libraries' (library_logs.py)
    # User code first: a wrong 'module:Name' fails before minutes of loading.
    user_callbacks, loss_function = _load_user_code(config)
    # The model's folder (the demo model or a GGUF file is built or converted here, with its own
    # progress), then the data's: a wrong data path fails before the model loads.
    model_path = resolve_model(job, stop)
    resolve_dataset(config.dataset, job.workspace)
    # Devices and precision before the tokenizer and the weights load: a GPU that is not here fails
    # first, and the thread limit must come before the first tensor op.
    devices, precision = _choose_devices(job)
    on_cpu = devices[0].id == "cpu"
    # The tokenizer with the run's chat template, before any row is encoded with it.
    tokenizer, template = _load_tokenizer(job, model_path)
    rows = _load_data(job, model_path, tokenizer)
    # The model after the rows: data that cannot be used fails before the largest load, and a
    # preference stage's adapter to continue is found with its rows.
    model, parameters, checkpointing = _load_model(job, model_path, precision, devices, on_cpu, rows.adapter,
                                                   template, tokenizer, _row_tokens(config, rows))
    # The Trainer's arguments after the model: FSDP wraps the model's own decoder layer classes.
    facts = RunFacts(precision, has_eval=rows.eval is not None, on_cpu=on_cpu, world_size=job.world_size,
                     checkpointing=checkpointing)
    args = argument_values(config, job.run_dir, facts, decoder_layer_classes(model))
    args["warmup_steps"] = warmup_steps(config, rows.counts.train, job.world_size)
    # The callbacks in the order the Trainer calls them; the disk check sizes a save by the trainable
    # parameters, so they come after the model.
    # The learning report after the trainer's own callbacks: a checkpoint is scored once it is saved.
    learning = LearningReport(job, tokenizer, model_path) if config.learning_report else None
    if learning is not None and config.distributed in SHARDED_WEIGHTS:
        # One rank cannot generate with weights sharded over all of them: every rank would have to
        # join each forward. The report is made after the run instead.
        log.warning("%s", msg("learning.sharded", distributed=config.distributed, run=job.run_dir))
        learning = None
    # The learned stop after the report: an epoch's last checkpoint is scored before the run stops there.
    learned = [LearnedStop(job, tokenizer)] if config.stop_when_learned and config.stage == "sft" else []
    callbacks, checkpoints, disk, clock = _make_callbacks(job, stop, rows, parameters,
                                                          [*([learning] if learning else []), *learned,
                                                           *extra_callbacks, *user_callbacks])
    trainer = _make_trainer(job, model, args, rows, tokenizer, callbacks, loss_function)
    trainer.remove_callback(PrinterCallback)  # MetricsCallback writes the readable line instead
    return Session(job, trainer, rows.counts, precision, checkpoints, parameters, clock,
                   disk if config.stage == "sft" else None, learning=learning)


def _load_user_code(config):
    """(the user's callbacks, the user's loss function or None), imported from 'module:Name' references."""
    user_callbacks = [_instantiate(ref) for ref in config.callbacks]
    loss_function = import_reference(config.loss_function) if config.loss_function else None
    if config.callbacks or loss_function:
        log.info("user callbacks: %s; loss_function: %s", ", ".join(config.callbacks) or "none",
                 config.loss_function or "the model's own")
    return user_callbacks, loss_function


def _choose_devices(job: Job) -> tuple[list, str]:
    """(the training devices, the precision on them); this process's share of the cores set, and the
    devices recorded in status.json."""
    devices, precision = choose_devices(job.config)
    limit_threads()  # this process's share of the cores, before the first tensor op
    if job.is_main:
        # Recorded by every launch path (the app's store writes them at create; a run started
        # with `python -m backend.train` writes them here), so no second run starts beside it.
        held = {} if read_status(job.run_dir).get("devices") else {"devices": [d.id for d in devices]}
        if held and (shared := shared_devices_warning(job, held["devices"])):  # by hand: nobody checked them
            log.warning("%s", shared)
        update_status(job.run_dir, precision=precision, world_size=job.world_size, **held)
    return devices, precision


def _load_tokenizer(job: Job, model_path: str):
    """(the tokenizer, the chat template applied to it)."""

    tokenizer = load_tokenizer(model_path, trust_remote_code=job.config.trust_remote_code)
    template = apply_for_model(tokenizer, job.config.chat_template, model_path)  # before any row is encoded
    log.info("%s", template.describe())
    if job.is_main:  # what `auto` became, beside the choice config.yaml names
        update_status(job.run_dir, chat_template=template.as_dict())
    return tokenizer, template


def _load_data(job: Job, model_path: str, tokenizer) -> _Rows:
    """The stage's train and eval rows, encoded; a preference stage's adapter to continue first."""
    config = job.config
    if config.stage != "sft":
        from backend.training.preference import build_preference_datasets, init_adapter_dir

        adapter = init_adapter_dir(config, job.workspace)
        if config.stage == "grpo":
            rows = _Rows(*build_grpo_datasets(tokenizer, config, job.workspace, model_context_length(model_path),
                                              job.world_size), adapter=adapter)
        else:
            rows = _Rows(*build_preference_datasets(tokenizer, config, job.workspace), adapter=adapter)
    else:
        rows = _Rows(*build_datasets(tokenizer, config, job.workspace,
                                     replay=_replay_source(config, model_path, tokenizer, job)))
    counts = rows.counts
    log.info("rows: %d total, %d train (%d of them replay), %d eval, %d truncated, %d dropped %s", counts.total,
             counts.train, counts.replay, counts.eval, counts.truncated, counts.dropped, counts.reasons or "")
    return rows


def _row_tokens(config, rows: _Rows) -> float | None:
    """The tokens a row of a step takes in the encoded SFT rows, as the Plan sizes a step (None: another stage)."""
    if config.stage != "sft":
        return None
    return step_row_tokens([len(ids) for ids in rows.train["input_ids"]], config.cutoff_len, config.packing)


def _load_model(job: Job, model_path: str, precision: str, devices: list, on_cpu: bool, adapter, template,
                tokenizer, row_tokens: float | None = None):
    """(the model with its adapters or full training set up, its parameter counts, gradient checkpointing)."""
    config = job.config
    quantized_on_gpu = config.method == "qlora" and not on_cpu
    device_map = {"": int(os.environ.get("LOCAL_RANK", "0"))} if quantized_on_gpu else None
    checkpointing = checkpointing_for(config, model_path, precision, devices, row_tokens)
    # Seed before the adapters exist: LoRA A starts random, and the Trainer seeds only later.
    set_seed(config.seed)
    model = build_model(config, model_path, precision, device_map, adapter, checkpointing,
                        attention_implementation(not on_cpu), template=template, tokenizer=tokenizer)
    parameters = parameter_counts(model)
    log.info("method %s, precision %s, %d of %d parameters trainable", config.method, precision,
             parameters["trainable_parameters"], parameters["total_parameters"])
    return model, parameters, checkpointing


def _make_callbacks(job: Job, stop: StopRequest, rows: _Rows, parameters: dict, extra: list):
    """(the Trainer's callbacks in their order, the checkpoint markers, the disk check, the run clock).
    `extra`: Ray's reporting, then the user's callbacks, after the markers."""
    config = job.config
    checkpoints = CheckpointCallback(job.run_dir, config.save_total_limit)
    disk = DiskSpaceCallback(job.run_dir, parameters["trainable_parameters"] * 12 + 2**20)
    # Order matters: the stop flag and DefaultFlowCallback decide should_save before the disk check.
    clock = RunClock(job.run_dir, job.resume_from)  # before checkpoints: its file is in before the marker
    callbacks = [GracefulStop(stop, job.run_dir if job.is_main else None), disk, MetricsCallback(job.run_dir), clock,
                 checkpoints, FiniteLoss(), ThreadShare()]
    if config.early_stopping_patience:
        if rows.eval is None:
            raise ConfigError(msg("train.no_eval_rows"))
        callbacks.append(EarlyStop(config.early_stopping_patience, config.early_stopping_threshold))
    callbacks.append(PlanCheck(job.run_dir if job.is_main else None, config))
    if config.stage == "grpo":  # a run whose groups all score alike trains nothing: it says so
        callbacks.append(GroupSignalCheck(job.run_dir if job.is_main else None, config.num_generations))
    callbacks += extra
    return callbacks, checkpoints, disk, clock


def _make_trainer(job: Job, model, args: dict, rows: _Rows, tokenizer, callbacks: list, loss_function) -> Trainer:
    """The stage's Trainer: TRL's for a preference stage, else StudioTrainer with the run's loss and batches."""
    config = job.config
    if config.stage != "sft":
        from backend.training.preference import preference_trainer

        log.info("stage %s (TRL), reference: %s", config.stage, _reference(config, rows.adapter))
        if config.stage == "grpo":
            from backend.training.grpo import grpo_trainer as preference_trainer  # sampled completions, rewards
        return preference_trainer(config, model, args, rows.train, rows.eval, tokenizer, callbacks,
                                  continued=rows.adapter is not None)
    loss_head = choose_loss(model, user_loss=loss_function is not None, liger=config.use_liger_kernel)
    collator = collator_for(config, model, tokenizer)
    if isinstance(collator, PackedCollator):
        # Packed batches carry no padding for length grouping to save, and grouping would put the
        # batch of the longest rows first: random batches keep the peak memory near the average.
        args["train_sampling_strategy"] = "random"
    return StudioTrainer(
        model=model, args=TrainingArguments(**args), train_dataset=rows.train, eval_dataset=rows.eval,
        data_collator=collator, processing_class=tokenizer, callbacks=callbacks,
        compute_loss_func=loss_function, loss_head=loss_head,
    )


def warmup_steps(config, train_rows: int, world_size: int) -> int:
    """The warmup in optimizer steps, not warmup_ratio: none on a run too short for one (WARMUP_MIN_STEPS)."""

    numbers = derived_numbers(config, train_rows, world_size)
    steps, total = numbers["warmup_steps"], numbers["total_steps"]
    if steps:
        log.info("warmup: %d of %d steps (warmup_ratio %g)", steps, total, config.warmup_ratio)
    elif config.warmup_ratio > 0:
        log.info("warmup: none (warmup_ratio %g of %d steps; a run of fewer than %d steps trains at the full "
                 "learning rate from its first step, which a warmup would run at 0)",
                 config.warmup_ratio, total, WARMUP_MIN_STEPS)
    return steps


def _reference(config, adapter) -> str:
    if config.stage in ("orpo", "simpo"):
        return "none (reference-free loss)"
    if config.stage == "grpo" and config.beta == 0:
        return "none (beta 0: no KL term)"
    if config.method == "full":
        return "a frozen copy of the model"
    return f"the adapter {adapter} (frozen copy)" if adapter else "the base model (adapter disabled)"


def _instantiate(ref: str):
    target = import_reference(ref)
    return target() if isinstance(target, type) else target


def train(session: Session, stop: StopRequest) -> str:
    """Train (or resume) until done or stopped; returns the final state."""
    job, trainer = session.job, session.trainer
    resume = job.resume_from
    if job.resuming and job.is_main:
        for name in remove_partial_saves(job.run_dir):  # a killed save's leftovers: never mixed with a new save
            log.info("removed the incomplete %s", name)
    if resume:
        state = TrainerState.load_from_json(str(resume / "trainer_state.json"))
        best = session.checkpoints.best
        session.checkpoints.restore(best, state.log_history)
        log.info("resuming from %s (step %d)", resume.name, state.global_step)
    elif job.resuming:
        log.warning("no complete checkpoint in %s: starting again from step 0", job.run_dir)
    _system_record(session, "resume" if resume else "start")
    if job.is_main and not job.resuming:
        record_estimate(session)
    if job.is_main and (warning := steps_warning(trainer_total_steps(session), job.config)):
        log.warning(warning)  # an absurd plan (num_train_epochs=1e30): said before any time is spent
        update_status(job.run_dir, plan_warning=warning)
    if stop.requested:
        return "stopped"
    if resume and state.global_step >= trainer_total_steps(session):
        # The plan was done; only final/ or the summary was missing (a kill or a full disk
        # while they were written). The Trainer would train one more step here when the
        # last step ends mid-epoch, so load the checkpoint and finish instead.
        log.info("%s is the last step of the plan: writing final/ without training further", resume.name)
        trainer._load_from_checkpoint(str(resume))
        trainer.state = state
        return "completed"
    session.output = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    done = trainer.state.global_step >= trainer.state.max_steps or not stop.requested
    return "completed" if done else "stopped"


def trainer_total_steps(session: Session) -> int:
    """Optimizer steps of the (possibly changed) plan, as the Trainer computes them."""

    return derived_numbers(session.job.config, session.counts.train, session.job.world_size)["total_steps"]


def is_listed_run(job: Job) -> bool:
    """A run of the workspace's runs/ folder (a speed probe trains in a scratch folder elsewhere)."""
    return job.run_dir.parent.resolve() == job.workspace.runs_dir.resolve()


def record_estimate(session: Session) -> None:
    """status.json's "estimate" as the run starts (backend/training/estimate.py), for summary.json to set
    beside the actual time. An estimate that cannot be made never stops the run."""

    job = session.job
    if not is_listed_run(job):
        return
    try:
        estimate = estimate_run_seconds(job.config, job.workspace, trainer_total_steps(session),
                                        training_devices(job.config.devices))
    except Exception as error:  # noqa: BLE001 - an estimate is advice, the run goes on without it
        log.info("time estimate: none (%s)", error)
        return
    log.info("time estimate: %s", estimate.message())
    update_status(job.run_dir, estimate=estimate.to_dict())


def record_run_speed(job: Job, summary: dict) -> None:
    """This run's wall seconds a step into the workspace speed log: the next run of these settings is
    estimated from it (evaluation and saves included, as in its wall time)."""

    steps = summary.get("global_step") or 0
    if not is_listed_run(job) or summary.get("sessions", 1) != 1 or steps < 1 or not summary.get("wall_time_s"):
        return  # a resumed run's seconds do not split cleanly by session
    profile = speed_profile(read_lines(job.run_dir / METRICS_FILE), summary["wall_time_s"], job.config)
    record_speed(job.workspace.root, job.config, source="run", seconds_per_step=summary["wall_time_s"] / steps,
                 steps=steps, tokens_per_second=summary.get("train_tokens_per_second"), run_id=job.run_dir.name,
                 profile=profile)


def _system_record(session: Session, event: str) -> None:
    job = session.job
    if job.is_main:
        append_metrics(job.run_dir, {"time": round(time.time(), 3), "step": _resume_step(job), "epoch": 0.0,
                                     "kind": "system", "event": event, "precision": session.precision,
                                     "world_size": job.world_size, **session.parameters,
                                     **session.counts.as_dict()})


def _resume_step(job: Job) -> int:
    return checkpoint_step(job.resume_from) if job.resume_from else 0


def finish(session: Session, final_state: str) -> int:
    job, trainer = session.job, session.trainer
    final_step = None
    if final_state == "completed":
        final = job.run_dir / FINAL_DIR
        if job.is_main and session.disk is not None:
            session.disk.check(final=True)  # a clear refusal now, not a half-written final/
        final_step = best_weights(trainer, job.run_dir, session.checkpoints.best)  # the best after an early stop
        trainer.save_model(str(final))  # adapter (or full model) + tokenizer
        _barrier()
        if job.is_main:
            mark_complete(final)
            if session.learning is not None:
                session.learning.final(trainer.model, final_step or trainer.state.global_step)
    elif final_state == "stopped" and session.learning is not None:
        session.learning.stopped_checkpoint(trainer.model, trainer.state.global_step)
    if job.is_main:
        stopper, learned = early_stop_of(trainer), learned_stop_of(trainer)
        summary = write_summary(
            job.run_dir, state=trainer.state, train_output=session.output,
            clock=session.clock,
            counts=session.counts.as_dict(), best=session.checkpoints.best, precision=session.precision,
            world_size=job.world_size, final_state=final_state, parameters=session.parameters,
            final_step=final_step, early_stopped_at=stopper.stopped_at if stopper else None,
            estimate=read_status(job.run_dir).get("estimate"), learned_stop=learned.summary() if learned else None)
        append_metrics(job.run_dir, {"time": round(time.time(), 3), "step": trainer.state.global_step,
                                     "epoch": round(trainer.state.epoch or 0.0, 4), "kind": "system",
                                     "event": "end", "state": final_state,
                                     **{k: v for k, v in summary.items() if k.startswith("peak_")}})
        record_run_speed(job, summary)  # after the end line: the profile ends there
        update_status(job.run_dir, state=final_state, exit_code=0, ended_at=time.time(),
                      global_step=trainer.state.global_step, max_steps=trainer.state.max_steps,
                      epoch=round(trainer.state.epoch or 0.0, 4))
        early = (f" of {trainer.state.max_steps} (early stopping)" if summary.get("early_stopped_at") else
                 f" of {trainer.state.max_steps} (learned its rows)" if learned and learned.stopped_at else "")
        log.info("%s at step %d%s; summary in %s", final_state, trainer.state.global_step, early,
                 job.run_dir / "summary.json")
    return 0
