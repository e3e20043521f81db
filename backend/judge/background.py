"""A judgement as a background job, for the Evaluate tab: checked here first
(runner.prepare_judgement: a bad URL, rows, template or rubric is a sentence before
anything starts), then `python -m backend.evaluate --judge ...` detached,
reporting through RUN/eval/judge/progress.json like the other jobs
(backend/runs/jobs.py). The API key travels in the job's environment
($FINETUNE_STUDIO_JUDGE_KEY), never on its command line, which any user of
the machine can read."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from backend.evaluation.judge_results import judge_dir
from backend.judge import runner
from backend.judge.cli import KEY_ENV
from backend.messages import UserError, msg
from backend.runs.jobs import RUNNING, read_progress, write_progress
from backend.runs.processes import REPO_ROOT, create_time, repo_env, spawn_detached

PROGRESS_FILE = "progress.json"
LOG_FILE = "judge.log"


def judgement_progress_path(run_dir: Path) -> Path:
    return judge_dir(run_dir) / PROGRESS_FILE


def job_args(judgement: runner.Judgement) -> list[str]:
    j = judgement
    args = ["--run", str(j.run_dir), "--judge", j.endpoint.url, "--judge-model", j.endpoint.model]
    if j.mode == "pairwise":
        args += ["--pairwise", *j.names]
    elif j.mode == "graded":
        args += ["--graded", "--rubric-kind", j.rubric_kind] + (["--checkpoint", *j.names] if j.names else [])
    else:
        args.append("--calibrate")
    args += ["--judge-source", j.source] if j.mode != "calibration" else []
    args += ["--max-samples", str(j.max_samples)] if j.max_samples else []
    return args


def start_judgement(judgement: runner.Judgement) -> int:
    """Launch the judgement detached; its pid. Refuses (UserError) while one runs for the run."""
    run_dir = Path(judgement.run_dir)
    if read_progress(judgement_progress_path(run_dir)).get("state") == RUNNING:
        raise UserError(msg("judge.running", run=run_dir.name))
    runner.prepare_judgement(judgement)  # every refusal now, as a sentence, not in a log later
    path = judgement_progress_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    env = repo_env()
    env.pop(KEY_ENV, None)
    if judgement.endpoint.api_key:
        env[KEY_ENV] = judgement.endpoint.api_key
    process = spawn_detached([sys.executable, "-m", "backend.evaluate", *job_args(judgement), "--progress", str(path)],
                             judge_dir(run_dir) / LOG_FILE, env, cwd=REPO_ROOT)
    write_progress(path, state=RUNNING, pid=process.pid, started_at=time.time(), start_time=create_time(process.pid),
                   done=0, total=0, stage=msg("job.stage.starting"), command=process.args,
                   log=str(judge_dir(run_dir) / LOG_FILE))
    return process.pid
