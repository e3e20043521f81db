"""What the UI shows about a run: RunInfo, read from the run folder.

Reading is cheap enough for every UI tick: config.yaml is parsed once per
run (it is never edited after launch), and metrics.jsonl is tailed, each
call reading only the lines appended since the last one."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.messages import Message, UserError, message_of, msg
from backend.runs.files import (
    CONFIG_FILE,
    SUMMARY_FILE,
    MetricsTail,
    checkpoint_step,
    list_checkpoints,
)
from backend.storage.atomic_files import read_json


class RunError(UserError, RuntimeError):
    """A run operation that cannot be done; the message is meant for the user (a catalogued Message)."""


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path


@dataclass
class RunInfo:
    run_id: str
    run_dir: Path
    state: str
    model: str = ""
    method: str = ""
    dataset: str = ""
    created_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    global_step: int = 0
    max_steps: int | None = None
    progress: float = 0.0           # 0..1
    best_eval_loss: float | None = None
    training_stage: str = "sft"  # RunConfig.stage: sft or a preference stage
    preference_accuracy: float | None = None  # preference stages: the final one (eval split, else train)
    error: str | None = None
    advice: str | None = None
    plan_warning: str | None = None  # the worker's warning about an absurdly long plan (training/plan_check.py)
    resume_warnings: list[Message | str] = field(default_factory=list)  # settings changed on resume (training/cli.py)
    # what the worker found while training, kept after the end (grpo steps that trained nothing: training/grpo_signal.py)
    train_warning: Message | None = None
    checkpoints: list[Checkpoint] = field(default_factory=list)  # complete ones, by step
    config: RunConfig | None = None  # None when config.yaml is unreadable (see error)
    pid: int | None = None
    devices: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    # A stage before training, e.g. {"name": "demo_model", "done": 40, "total": 120} while the
    # demo model is built on first use (backend/runs/model_builds.py); None when training.
    stage: dict | None = None
    # error / advice as catalogued messages (backend/messages.py) when the worker had ids for them:
    # the UI shows them in the user's language; `error` / `advice` hold the English.
    error_message: Message | None = None
    advice_message: Message | None = None
    # The queue (backend/runs/queue.py): when the run entered it (None: started directly), the sweep
    # that made it, and whether it still waits for its devices.
    queued_at: float | None = None
    sweep_id: str | None = None
    waiting: bool = False

    @property
    def stage_fraction(self) -> float | None:
        """0..1 through the current stage, None when there is none (or its size is not known yet)."""
        if not self.stage or not self.stage.get("total"):
            return None
        return min(1.0, (self.stage.get("done") or 0) / self.stage["total"])

    @property
    def live(self) -> bool:
        return self.state in ("queued", "running") and self.pid is not None


def is_waiting(status: dict) -> bool:
    """In the run queue (backend/runs/queue.py) and not started yet."""
    return status.get("queue_seq") is not None and status.get("state") == "queued" and not status.get("pid")


def load_config(run_dir: Path) -> RunConfig:
    try:
        return RunConfig.load(Path(run_dir) / CONFIG_FILE)
    except ConfigError as error:
        raise RunError(msg("run.config_unreadable", path=Path(run_dir) / CONFIG_FILE, error=message_of(error) or error)) from None


class InfoReader:
    """Builds RunInfo from status.json and the run folder, with per-run caches."""

    def __init__(self):
        self._configs: dict[Path, tuple[int | None, RunConfig]] = {}
        self._best_eval: dict[Path, tuple[MetricsTail, float | None]] = {}

    def config(self, run_dir: Path) -> RunConfig:
        """config.yaml, parsed again only when it changed (a resume with new settings rewrites it)."""
        try:
            stamp = (Path(run_dir) / CONFIG_FILE).stat().st_mtime_ns
        except OSError:
            stamp = None
        cached = self._configs.get(run_dir)
        if cached is None or cached[0] != stamp:
            self._configs[run_dir] = cached = (stamp, load_config(run_dir))
        return cached[1]

    def forget(self, run_dir: Path) -> None:
        self._configs.pop(run_dir, None)
        self._best_eval.pop(run_dir, None)

    def read(self, run_dir: Path, status: dict) -> RunInfo:
        # A run started by hand (`python -m backend.train`) has no store to write started_at and
        # created_at: its worker's own start time stands for both.
        started = status.get("started_at") or status.get("worker_started_at")
        info = RunInfo(run_id=run_dir.name, run_dir=run_dir, state=status.get("state", "queued"),
                       created_at=status.get("created_at") or started, started_at=started,
                       ended_at=status.get("ended_at"), global_step=int(status.get("global_step") or 0),
                       error=status.get("error"), advice=status.get("advice"), pid=status.get("pid"),
                       plan_warning=status.get("plan_warning"),
                       train_warning=Message.from_dict(status.get("train_warning")),
                       resume_warnings=[Message.from_dict(w) or str(w) for w in status.get("resume_warnings") or []],
                       devices=status.get("devices") or [], command=status.get("command") or [],
                       stage=status.get("stage") if status.get("state") in ("queued", "running") else None,
                       error_message=Message.from_dict(status.get("error_message")),
                       advice_message=Message.from_dict(status.get("advice_message")),
                       queued_at=status.get("queued_at"), sweep_id=status.get("sweep_id"),
                       waiting=is_waiting(status),
                       checkpoints=[Checkpoint(checkpoint_step(p), p) for p in list_checkpoints(run_dir)])
        try:
            info.config = self.config(run_dir)
        except RunError as error:
            info.error = info.error or str(error)
        if info.config is not None:
            info.model, info.method, info.dataset = (info.config.model_name_or_path, info.config.method,
                                                     info.config.dataset)
            info.training_stage = info.config.stage
        max_steps = status.get("max_steps") or (info.config.max_steps if info.config else -1)
        info.max_steps = max_steps if max_steps and max_steps > 0 else None
        if info.state == "completed":
            info.progress = 1.0
        elif info.max_steps:
            info.progress = min(1.0, info.global_step / info.max_steps)
        info.best_eval_loss = self.best_eval_loss(run_dir)
        if info.training_stage != "sft":
            summary = read_json(run_dir / SUMMARY_FILE, default={}) or {}
            info.preference_accuracy = summary.get("final_eval_preference_accuracy",
                                                   summary.get("final_train_preference_accuracy"))
        return info

    def best_eval_loss(self, run_dir: Path) -> float | None:
        """From summary.json once the run wrote it, else the lowest eval_loss so far."""
        summary = read_json(run_dir / SUMMARY_FILE, default={}) or {}
        tail, best = self._best_eval.get(run_dir) or (MetricsTail(run_dir), None)
        for record in tail.read_new():
            loss = record.get("eval_loss")
            if loss is not None and (best is None or loss < best):
                best = loss
        self._best_eval[run_dir] = (tail, best)
        return summary["best_eval_loss"] if summary.get("best_eval_loss") is not None else best
