"""`python -m backend.evaluate --run R --learning`: the learning report
(backend/learning/) of a finished or stopped run, every checkpoint scored,
with no time budget."""

from __future__ import annotations

from pathlib import Path

from backend.config import RunConfig
from backend.evaluation.results import checkpoint_choices, step_of
from backend.evaluation.scoring import EvalError, ModelSet
from backend.learning.reporter import LearningReporter
from backend.messages import msg
from backend.runs.files import BASE, CONFIG_FILE
from backend.runs.workspace import Workspace


def report_for_run(run_dir: Path, checkpoints: list[str] | None = None, workspace: Workspace | None = None,
                   progress=None) -> dict:
    """Score the base and `checkpoints` (default: every complete one, final/ included) of a finished
    or stopped run, with no time budget; returns the report."""
    run_dir = Path(run_dir).resolve()
    if not (run_dir / CONFIG_FILE).is_file():
        raise EvalError(msg("evaluate.not_run", path=run_dir, config=CONFIG_FILE))
    workspace = workspace or Workspace.for_run_dir(run_dir)
    config = RunConfig.load(run_dir / CONFIG_FILE)
    names = [c for c in checkpoint_choices(run_dir) if checkpoints is None or c in checkpoints or c == BASE]
    models = ModelSet(run_dir, config, workspace)
    reporter = LearningReporter(run_dir, config, workspace, models.tokenizer, models.base_path, progress=progress)
    for name in names:
        if name == BASE and reporter.has_base:
            continue
        reporter.score(models.model_for(name), name, step_of(run_dir, name))
    return reporter.report
