"""Training through Ray Train: `python -m backend.train` with `ray_address` set
is the Ray *driver*; the same training session (backend.training.session)
runs in each worker of a `ray.train.torch.TorchTrainer`.

Ray starts the workers, sets RANK / WORLD_SIZE / LOCAL_RANK and the process
group (gloo on CPUs, NCCL on GPUs); from there the Trainer runs as under
torchrun and global rank 0 writes the run folder, so the contract does not
change: status.json, metrics.jsonl, checkpoint-N/ + COMPLETE, final/,
summary.json. Ray's experiment folder *is* the run folder (storage_path =
runs/, name = run id) and each checkpoint-N is reported to Ray where it lies
(no copy). On several machines the run folder must be on storage that every
node mounts at the same path (docs/SCALE.md).

The driver holds the run's identity (pid in status.json): Stop = SIGTERM to
it, which it passes on to the workers as a file in the run folder (they may
be on other machines); a driver that vanishes takes a local Ray instance and
its workers with it (Ray's fate sharing), so the run becomes `lost`.
"""

from __future__ import annotations

import logging
import math
import os
import signal
from pathlib import Path

from transformers import TrainerCallback

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.messages import msg
from backend.runs.files import read_status
from backend.runs.workspace import Workspace
from backend.training.cli import Job, setup_logging
from backend.training.errors import fail
from backend.training.ray_log import RayLogFile

log = logging.getLogger("backend.train")
STOP_FILE = ".stop-requested"
RAY_SNAPSHOT = "checkpoint_manager_snapshot.json"  # ray.train.v2 CHECKPOINT_MANAGER_SNAPSHOT_FILENAME
REPO_ROOT = Path(__file__).resolve().parents[2]
# Passed to the workers: they may start on another machine, or under a Ray started elsewhere.
PROPAGATE = ("HF_HUB_OFFLINE", "HF_HOME", "TOKENIZERS_PARALLELISM", "OMP_NUM_THREADS", "PYTHONUNBUFFERED")


def run_on_ray(job, stop) -> int:
    """Train `job` on Ray; returns the exit code (the workers write the run's end into status.json)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network calls from a local tool
    os.environ.setdefault("RAY_COLOR_PREFIX", "0")  # train.log is a file, not a terminal
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    config = job.config
    stop_file = job.run_dir / STOP_FILE
    stop_file.unlink(missing_ok=True)  # a resume after a stop starts clean
    _forget_ray_checkpoints(job.run_dir)
    ray_log = RayLogFile(job.run_dir)
    _init(ray, config, ray_log)

    def on_sigterm(signum, frame) -> None:
        stop.requested = True
        stop_file.touch()

    signal.signal(signal.SIGTERM, on_sigterm)  # after ray.init, which installs its own
    if stop.requested:
        stop_file.touch()
    resources = {"CPU": config.ray_cpus_per_worker, **({"GPU": 1} if config.ray_use_gpu else {})}
    trainer = TorchTrainer(
        _worker_loop,
        train_loop_config={"job": _job_fields(job)},
        scaling_config=ScalingConfig(num_workers=config.ray_num_workers, use_gpu=config.ray_use_gpu,
                                     resources_per_worker=resources),
        run_config=RunConfig(name=job.run_dir.name, storage_path=str(job.run_dir.parent)),
    )
    log.info("Ray Train: %d workers at %s; Ray's own messages are in %s", config.ray_num_workers,
             config.ray_address, ray_log.path)
    try:
        trainer.fit()
    except Exception:
        status = read_status(job.run_dir)
        if status.get("state") == "failed":  # the worker said what went wrong
            return int(status.get("exit_code") or 1)
        raise
    finally:
        ray.shutdown()
        ray_log.close()
        stop_file.unlink(missing_ok=True)
    return int(read_status(job.run_dir).get("exit_code") or 0)


def _forget_ray_checkpoints(run_dir: Path) -> None:
    """Drop Ray's own list of the run's checkpoints (checkpoint_manager_snapshot.json in the run
    folder, which Ray's experiment folder is). The run folder decides where a resume starts (the
    newest complete checkpoint-N, already chosen in job.resume_from); Ray's list is never read by
    the session, and it still names the checkpoints save_total_limit deleted, which makes Ray
    refuse to start ("a reference to a checkpoint that does not exist anymore")."""
    snapshot = run_dir / RAY_SNAPSHOT
    if snapshot.exists():
        log.info("Ray's checkpoint list %s is left out: the run folder's checkpoints decide the resume", RAY_SNAPSHOT)
        snapshot.unlink()


def _init(ray, config, ray_log: RayLogFile) -> None:
    env = {k: os.environ[k] for k in PROPAGATE if k in os.environ}
    env.update({k: v for k, v in os.environ.items() if k.startswith("FINETUNE_STUDIO_")})
    paths = [str(REPO_ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # The workers' output reaches the driver, which keeps it in ray.log; rank 0 writes train.log itself.
    common = dict(runtime_env={"env_vars": env}, configure_logging=False, log_to_driver=True)
    ray_log.before_init()
    if config.ray_address == "local":
        # A small local instance: logical CPUs for the workers, no dashboard, a small object store
        # (the session moves no data through it).
        cpus = max(1, math.ceil(config.ray_num_workers * config.ray_cpus_per_worker))
        ray.init(num_cpus=cpus, include_dashboard=False, object_store_memory=128 * 2**20, **common)
    else:
        try:
            ray.init(address=config.ray_address, **common)
        except ConnectionError:  # the cluster check_ray_cluster found went away since
            raise ConfigError(msg("scale.ray_none_running") if config.ray_address == "auto" else
                              msg("scale.ray_unreachable", address=config.ray_address, error="gone")) from None
    ray_log.after_init()


def _job_fields(job) -> dict:
    return {"config": job.config.to_dict(), "run_dir": str(job.run_dir), "workspace": str(job.workspace.root),
            "resume_from": str(job.resume_from) if job.resume_from else None, "resuming": job.resuming,
            "warnings": [str(w) for w in job.warnings]}


def _worker_loop(loop_config: dict) -> None:
    """One Ray Train worker: the worker's own build -> train -> finish."""
    from ray.train.huggingface.transformers import prepare_trainer

    from backend.training.session import build, finish, train

    fields = loop_config["job"]
    job = Job(config=RunConfig.from_dict(fields["config"]), run_dir=Path(fields["run_dir"]),
              workspace=Workspace(Path(fields["workspace"])), resuming=fields["resuming"],
              resume_from=Path(fields["resume_from"]) if fields["resume_from"] else None,
              warnings=fields["warnings"])  # rank and world size: from Ray's RANK / WORLD_SIZE
    setup_logging(job)  # rank 0: into train.log itself (the stream Ray forwards goes to ray.log)
    stop = StopFile(job.run_dir / STOP_FILE)
    try:
        session = build(job, stop, extra_callbacks=(RayReport(job.run_dir),))
        prepare_trainer(session.trainer)
        finish(session, train(session, stop))
    except Exception as error:
        code = fail(job, error)  # rank 0 writes error + advice into status.json
        raise RuntimeError(f"training failed with exit code {code}: {error}") from None


class StopFile:
    """The driver's SIGTERM, seen by a worker as a file in the run folder. GracefulStop reads
    `requested` at each step boundary, so a stop is never missed between polls (one stat a step)."""

    def __init__(self, path: Path):
        self.path, self._requested = Path(path), False

    @property
    def requested(self) -> bool:
        return self._requested or self.path.exists()

    @requested.setter
    def requested(self, value: bool) -> None:  # GracefulStop writes the ranks' agreed answer back
        self._requested = bool(value)


class RayReport(TrainerCallback):
    """Ray's Transformers integration (what RayTrainReportCallback does) without
    its copy: after checkpoint-N is complete, rank 0 reports it to Ray where it
    lies (the run folder is Ray's experiment folder) with the logged metrics.
    Every rank reports, as Ray requires; placed after CheckpointCallback."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)

    def on_save(self, args, state, control, **kwargs):
        import ray.train
        from ray.train import Checkpoint, CheckpointUploadMode

        metrics = {"step": state.global_step}
        for entry in state.log_history:
            metrics.update({k: v for k, v in entry.items() if isinstance(v, (int, float))})
        folder = self.run_dir / f"checkpoint-{state.global_step}"
        checkpoint = Checkpoint.from_directory(str(folder)) if state.is_world_process_zero and folder.is_dir() else None
        ray.train.report(metrics, checkpoint=checkpoint, checkpoint_upload_mode=CheckpointUploadMode.NO_UPLOAD)

