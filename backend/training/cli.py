"""Command line, run folder and resume reconciliation for the worker.

    python -m backend.train --config run.yaml [--run-dir DIR] [--workspace DIR] [--set key=value ...]
    python -m backend.train --set stage=dpo --set dataset=NAME [...]      (the defaults as the base)
    python -m backend.train --resume RUN_DIR [--set key=value ...]
    python -m backend.train --print-default-config
    python -m backend.train --config run.yaml --queue [--workspace DIR]   (backend/runs/queue_wait.py)
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from backend.config import ABSURD_LEARNING_RATE, RunConfig, import_reference
from backend.config_policy import MUST_MATCH, WARN, ConfigError
from backend.config_recipes import recipe_config
from backend.data.resolve import check_dataset
from backend.messages import Message, message_of, msg
from backend.models.hardware import LAUNCHED_DEVICES_ENV, launch_env, training_devices
from backend.models.loading import model_context_length, needs_build, resolve_model_path
from backend.runs.checkpoint_check import checkpoint_problem
from backend.runs.files import COMPLETE_MARKER, CONFIG_FILE, LOG_FILE, list_checkpoints, new_run_dir
from backend.runs.store import RunStore, run_label
from backend.runs.workspace import DEFAULT_WORKSPACE, Workspace
from backend.scale.guards import check_worker
from backend.training.library_logs import route_python_logs, route_transformers_logs
from backend.training.rewards import check_user_functions

log = logging.getLogger("backend.train")

@dataclass
class Job:
    config: RunConfig
    run_dir: Path
    workspace: Workspace
    resume_from: Path | None = None  # the newest complete checkpoint when resuming
    resuming: bool = False
    warnings: list[Message | str] = field(default_factory=list)  # logged at start (English)
    new_folder: bool = False  # made by create_run_dir, named as the store names a run (no --run-dir given)
    rank: int = field(default_factory=lambda: int(os.environ.get("RANK", "0")))
    world_size: int = field(default_factory=lambda: int(os.environ.get("WORLD_SIZE", "1")))

    @property
    def is_main(self) -> bool:
        return self.rank == 0


class StoppedBeforeFirstStep(BaseException):
    """SIGTERM before the run's first step: nothing trained since it started, so nothing to save; the
    worker ends now. A BaseException, as KeyboardInterrupt is, so a library's `except Exception` around
    what was loading at that moment does not swallow it."""


class StopRequest:
    """SIGTERM sets `requested`; the GracefulStop callback acts on it at the next step boundary, once
    the first step has begun. Before that (`end_at_once`: loading, a model build, encoding the data, the
    learning report's first answers) it raises StoppedBeforeFirstStep, so the run ends within a moment
    instead of loading on for minutes and being killed at the grace period. Installed first thing."""

    def __init__(self):
        self.requested = False
        self.end_at_once = False  # set by the worker; GracefulStop clears it when the first step begins

    def install(self) -> StopRequest:
        signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        self.requested = True
        if self.end_at_once:
            self.end_at_once = False  # once: the worker's own end must not be interrupted again
            raise StoppedBeforeFirstStep


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m backend.train", description="FineTune Studio training worker.")
    parser.add_argument("--config", type=Path, help="Run config YAML (see --print-default-config).")
    parser.add_argument("--run-dir", type=Path, help="Run folder (default: a new one under WORKSPACE/runs).")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR", help="Continue this run from its newest complete checkpoint.")
    parser.add_argument("--workspace", type=Path, help=f"Workspace folder (default: {DEFAULT_WORKSPACE}).")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="Override one config field (repeatable), e.g. --set max_steps=20.")
    parser.add_argument("--recipe", choices=("starter", "demo-tiny"), default=None,
                        help="Defaults without --config: starter (SmolLM2-135M-Instruct learns the identity dataset) "
                             "or demo-tiny (the 2M demo model on its fact rows, seconds a run).")
    parser.add_argument("--print-default-config", action="store_true",
                        help="Print the recipe's config (--recipe, default starter) as YAML.")
    parser.add_argument("--dry-run", action="store_true",
                        help="Check the config, print the steps and the time estimate; train nothing.")
    parser.add_argument("--sweep", type=Path, metavar="SWEEP_YAML",
                        help="Queue one run per combination of the sweep file's grid over the config and wait "
                             "for them (docs/SWEEPS.md); with --dry-run only check them and print the estimate.")
    parser.add_argument("--queue", action="store_true",
                        help="Put the run in the workspace's queue: it starts when its devices are free (after "
                             "the runs before it); this command waits, serving the queue, until the run ends.")
    return parser.parse_args(argv)


def prepare_job(args: argparse.Namespace) -> Job:
    """Config + run folder. Raises ConfigError (or DatasetNotFound) for anything
    the user must fix first, before torch is imported."""
    job = _prepare_resume(args) if args.resume else _prepare_new(args)
    if job.config.learning_rate > ABSURD_LEARNING_RATE:  # the Plan's warning, for a run started here
        job.warnings.append(msg("train.warn.absurd_lr", lr=job.config.learning_rate))
    job.config.check_packages()
    pin_devices(job.config.devices, os.environ)
    choose_devices(job.config)  # a GPU or precision this machine lacks: exit 2 (no torch without a GPU driver)

    check_worker(job.config)  # FSDP / ZeRO / Ray / nodes on this machine: exit 2 with the fix
    check_references(job.config)
    name, models_dir = job.config.model_name_or_path, job.workspace.models_dir
    if not needs_build(name, models_dir):  # one built or converted first is checked after that stage
        check_model(job.config, resolve_model_path(name, models_dir))

    check_dataset(job.config.dataset, job.workspace, job.config.dataset_name,
                  job.config.stage)  # an unreadable file: exit 2 in a second, not after loading
    return job


def choose_devices(config: RunConfig) -> tuple[list, str]:
    """(the devices the run trains on, the precision on them); ConfigError for a setting this machine cannot
    honour."""
    try:
        devices = training_devices(config.devices)
    except ValueError as error:  # e.g. devices=7 on a machine without that GPU
        raise ConfigError(message_of(error) or str(error)) from None
    return devices, config.check_devices(devices)


def check_model(config: RunConfig, path: str) -> None:
    """The model folder `path` (resolved from config.model_name_or_path) exists and holds a readable
    config.json whose context fits the run; a name that is not a path stays a hub id."""
    name = config.model_name_or_path
    if not Path(path).is_dir() and (name.startswith((".", "/", "~")) or name.count("/") != 1):
        raise ConfigError(msg("train.model_missing", path=Path(name).expanduser()))
    if Path(path).is_dir():
        config.check_model_context(model_context_length(path))


def check_references(config: RunConfig) -> None:
    """The user's callbacks and loss function, imported now: each must be what the Trainer will call
    (a TrainerCallback class or instance; a function), else exit 2 naming the field before any model
    loads. A module-level function such as `os:system` would otherwise reach the Trainer's callback loop.
    transformers is imported only when there are callbacks to check (it takes seconds, and peft's
    bitsandbytes prints a line on a CPU)."""
    if config.callbacks:
        from transformers import TrainerCallback
    for ref in config.callbacks:
        target = import_reference(ref)
        if not (isinstance(target, TrainerCallback) or isinstance(target, type) and issubclass(target, TrainerCallback)):
            raise ConfigError(msg("config.not_callback", ref=ref, kind=_kind(target)))
    if config.stage == "grpo" and config.reward_functions:
        check_user_functions(config)  # imported and called once on a sample completion
    if config.loss_function:
        target = import_reference(config.loss_function)
        if not callable(target) or isinstance(target, type):
            raise ConfigError(msg("config.not_loss_function", ref=config.loss_function, kind=_kind(target)))


def _kind(value) -> str:
    """'a class', 'a function', 'a str' ... as a user reads it."""
    if isinstance(value, type):
        return f"the class {value.__name__}"
    if callable(value):
        return f"the function {getattr(value, '__name__', type(value).__name__)}"
    return f"a {type(value).__name__} value"


def pin_devices(devices: str, env) -> None:
    """Run by hand (no launcher pinned the GPUs): set CUDA_VISIBLE_DEVICES here,
    as backend.runs.processes does, before torch starts CUDA; LOCAL_RANK then
    indexes the chosen GPUs. A launcher's pinning is kept as it is."""
    if LAUNCHED_DEVICES_ENV in env or "torch" in sys.modules:
        return
    try:
        pinned = launch_env(devices, env)
    except ValueError as error:
        raise ConfigError(message_of(error) or str(error)) from None
    for name, value in pinned.items():
        if value is not None:
            env[name] = value


def _prepare_new(args: argparse.Namespace) -> Job:
    if not args.config and not args.overrides and not args.recipe:
        raise ConfigError(msg("train.no_config"))
    # Without --config the defaults are the base, as in `--set stage=dpo --set dataset=...`.
    config = (RunConfig.load(args.config) if args.config else recipe_config(args.recipe or "starter")).with_overrides(args.overrides)
    if args.run_dir:
        run_dir = args.run_dir
        workspace = Workspace(args.workspace) if args.workspace else Workspace.for_run_dir(run_dir)
    else:  # the folder itself is made once the checks pass (create_run_dir), so a refusal leaves none
        workspace = Workspace(args.workspace or DEFAULT_WORKSPACE)
        run_dir = workspace.runs_dir / f"{time.strftime('%Y%m%d-%H%M%S')}-{run_label(config)}"
    return Job(config=config, run_dir=run_dir.resolve(), workspace=workspace, new_folder=not args.run_dir)


def _prepare_resume(args: argparse.Namespace) -> Job:
    run_dir = args.resume.resolve()
    saved = RunConfig.load(run_dir / CONFIG_FILE)
    config = saved.with_overrides(args.overrides)
    warnings = reconcile_resume(saved, config)
    resume_from = readable_checkpoint(list_checkpoints(run_dir), warnings)
    workspace = Workspace(args.workspace) if args.workspace else Workspace.for_run_dir(run_dir)
    return Job(config=config, run_dir=run_dir, workspace=workspace, resuming=True,
               resume_from=resume_from, warnings=warnings)


def readable_checkpoint(complete: list[Path], warnings: list) -> Path | None:
    """The newest complete checkpoint whose files can be read; each newer one skipped is said in `warnings`."""

    skipped = None
    for folder in reversed(complete):
        try:
            problem = checkpoint_problem(folder)
        except OSError as error:
            problem = msg("checkpoint.unreadable", file=folder.name, problem=error.strerror or str(error))
        if problem is not None:
            # No longer complete: the main rank's cleanup removes it before a new save of that step.
            (folder / COMPLETE_MARKER).unlink(missing_ok=True)
        if problem is None:
            if skipped:
                warnings.append(msg("resume.skipped_broken", checkpoint=skipped[0], problem=skipped[1],
                                    fallback=folder.name))
            return folder
        skipped = skipped or (folder.name, problem)
    if skipped:
        warnings.append(msg("resume.none_readable", checkpoint=skipped[0], problem=skipped[1]))
    return None


def reconcile_resume(saved: RunConfig, config: RunConfig) -> list[Message | str]:
    """The warnings of resuming `saved` with `config`, by each field's resume policy (its metadata):
    a changed must_match field would load the checkpoint into a different model or adapter shape,
    or rescale a trained adapter (scale = lora_alpha / r, or / sqrt(r) with rsLoRA): the resumed
    model would answer differently from the checkpoint before its first step, so it is refused.
    A changed warn field is allowed, but the run is then not the same run any more."""
    changed = [f for f in dataclasses.fields(saved) if getattr(config, f.name) != getattr(saved, f.name)]
    refused = [f.name for f in changed if f.metadata["resume"] == MUST_MATCH]
    if refused:
        detail = ", ".join(f"{n} {getattr(saved, n)!r} -> {getattr(config, n)!r}" for n in refused)
        raise ConfigError(msg("resume.must_match", detail=detail))
    return [msg("resume.changed", name=f.name, old=getattr(saved, f.name), new=getattr(config, f.name))
            for f in changed if f.metadata["resume"] == WARN]


def create_run_dir(job: Job) -> None:
    """The folder and config.yaml (the run store may have written it already). A resume
    with changed settings rewrites it: config.yaml always describes what the run trains
    with now (the earlier values stay in train.log and status.json's resume_overrides)."""
    if job.new_folder and job.is_main:  # named as the app names a run: time, then run_name (else the method)
        made = new_run_dir(job.workspace.runs_dir, run_label(job.config))
        if made is None:
            raise ConfigError(msg("run.no_folder", folder=job.workspace.runs_dir))
        job.run_dir = made.resolve()
    job.run_dir.mkdir(parents=True, exist_ok=True)
    config_file = job.run_dir / CONFIG_FILE
    if not job.is_main:
        return
    if not config_file.exists():
        job.config.save(config_file)
    elif job.resuming and RunConfig.load(config_file) != job.config:
        log.info("resume settings written to %s", config_file)
        job.config.save(config_file)


def shared_devices_warning(job: Job, device_ids: list[str]) -> Message | None:
    """A run started by hand (python -m backend.train without --queue) starts at once whatever holds its
    devices, as a user at the command line may mean to: the sentence naming the live run it shares them
    with, or None. The app's Start and --queue wait in the queue instead (backend/runs/queue.py)."""
    busy = {device: run_id for device, run_id in RunStore(job.workspace).busy_devices().items()
            if run_id != job.run_dir.name}
    taken = [device for device in device_ids if device in busy]
    if not taken:
        return None
    return msg("train.warn.shares_devices", devices=", ".join(taken), run_id=busy[taken[0]])


def setup_logging(job: Job) -> None:
    """The project's log lines to stderr, and into train.log unless stderr already is train.log
    (the run store redirects the worker's output there: no duplicate lines); the libraries' to
    debug.log. A Ray worker's stderr goes to the driver's ray.log: its rank 0 writes train.log here."""
    level = logging.INFO if job.is_main else logging.WARNING
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    log_file = job.run_dir / LOG_FILE
    if job.is_main and not _same_file(sys.stderr, log_file):
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    logger = logging.getLogger("backend")
    logger.handlers = [h for h in logger.handlers if not getattr(h, "_worker", False)]
    for handler in handlers:
        handler.setFormatter(formatter)
        handler._worker = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(level)
    route_python_logs(job.run_dir)  # the libraries' lines: debug.log
    if "transformers" in sys.modules:  # imported by the checks above (a model's config): its lines too
        route_transformers_logs()


def _same_file(stream, path: Path) -> bool:
    try:
        a, b = os.fstat(stream.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
