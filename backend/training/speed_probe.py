"""The speed probe: a few real optimizer steps of a run's config, timed, then thrown away.

    python -m backend.training.speed_probe --config run.yaml --workspace W [--steps 6] [--progress FILE]

The worker itself (backend/training/worker.py's run_worker, the real model, data and Trainer) trains `steps` steps
into a scratch folder under workspace/speed/probes/ (not a run: the Runs tab never lists it),
logging every step, with one evaluation + save halfway. Its wall time is taken apart as a run's
is (backend/runs/speed_log.py speed_profile: set-up, a step, an evaluation + save, the end). The result goes into the workspace speed log as source "probe", which the time
estimate reads. The UI starts this as a background job (backend/runs/jobs.py), so its page stays
responsive; the caller checks first that no run holds the devices.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import sys
from pathlib import Path

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.messages import msg
from backend.runs.files import LOG_FILE, METRICS_FILE
from backend.runs.jobs import COMPLETED, FAILED, RUNNING, write_progress
from backend.runs.speed_log import read_lines, record_speed, speed_profile
from backend.runs.workspace import Workspace
from backend.storage.atomic_files import read_json
from backend.training.cli import parse_args
from backend.training.worker import run_worker

PROBE_STEPS = 6
PROBES_DIR = Path("speed") / "probes"


def probe_overrides(steps: int) -> list[str]:
    """The config's own settings for `steps` steps, a metrics line each, and one evaluation + save in the
    middle (as a longer run has them every save_steps) besides the one at the end."""
    return [f"max_steps={steps}", "logging_steps=1", f"save_steps={max(1, steps // 2)}", "eval_steps=null",
            "report_to=none", "early_stopping_patience=null"]


def run_probe(config: RunConfig, workspace: Workspace, steps: int = PROBE_STEPS, progress: Path | None = None) -> dict:
    """Train the probe, record its speed; returns the speed log record. Raises RuntimeError when it fails."""
    folder = workspace.root / PROBES_DIR / secrets.token_hex(4)
    folder.mkdir(parents=True, exist_ok=True)
    config_file = folder.parent / f"{folder.name}.yaml"
    config.save(config_file)
    # run_dir: the scratch run's status.json says what it waits for or does (the Plan shows it).
    write_progress(progress, state=RUNNING, done=0, total=steps, stage=msg("probe.started", steps=steps),
                   run_dir=str(folder))
    try:
        args = ["--config", str(config_file), "--run-dir", str(folder), "--workspace", str(workspace.root)]
        code = run_worker(parse_args([*args, *[a for item in probe_overrides(steps) for a in ("--set", item)]]))
        status = read_json(folder / "status.json", {}) or {}
        if code != 0 or status.get("state") != "completed":
            raise RuntimeError(str(status.get("error") or f"exit code {code}"))
        summary = read_json(folder / "summary.json", {}) or {}
        probed = config.with_overrides(probe_overrides(steps))  # its save_steps place the middle event
        profile = speed_profile(read_lines(folder / METRICS_FILE), float(summary.get("wall_time_s") or 0), probed)
        if profile is None:
            raise RuntimeError(str(msg("probe.no_steps", log=folder.parent / f"{folder.name}.log")))
        return record_speed(workspace.root, config, source="probe", seconds_per_step=profile["step"],
                            steps=profile["steps"], tokens_per_second=summary.get("train_tokens_per_second"),
                            profile=profile)
    finally:
        if (folder / LOG_FILE).is_file():  # kept beside the probes for a failed probe's reader
            shutil.copyfile(folder / LOG_FILE, folder.parent / f"{folder.name}.log")
        shutil.rmtree(folder, ignore_errors=True)
        config_file.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backend.training.speed_probe",
                                     description="Time a few real steps of a run config (the Plan's Measure speed).")
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=PROBE_STEPS)
    parser.add_argument("--progress", type=Path)
    args = parser.parse_args(argv)
    try:
        config = RunConfig.load(args.config)
        record = run_probe(config, Workspace(args.workspace), max(2, args.steps), args.progress)
    except (ConfigError, RuntimeError, OSError) as error:
        write_progress(args.progress, state=FAILED, error=str(error))
        print(f"speed probe failed: {error}", file=sys.stderr)
        return 1
    write_progress(args.progress, state=COMPLETED, done=record["steps"], result=record,
                   stage=msg("probe.done", per_step=f"{record['seconds_per_step']:.3g}", steps=record["steps"]))
    print(f"{record['seconds_per_step']:.4g} s a step over {record['steps']} steps", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
