"""The worker's path for one run, in this process: prepare the job, make its run folder, log,
mark it running, then train it (here, or as Ray's driver) and finish, or fail with error + advice.

`python -m backend.train` (backend/train.py) takes this path for a run; the speed probe
(speed_probe.py) takes the same path for its scratch run, so a probe times what a run does.
"""

from __future__ import annotations

import argparse
import logging
import os
import time

import psutil

from backend.messages import Message, msg
from backend.runs.files import read_status, update_status
from backend.runs.model_builds import BuildStopped
from backend.runs.notify import announce_end
from backend.training.cli import StoppedBeforeFirstStep, StopRequest, create_run_dir, prepare_job, setup_logging
from backend.training.errors import fail
from backend.training.library_logs import hold_library_logs
from backend.training.model_stage import stopped_during_build
from backend.training.unused_libraries import skip_bitsandbytes


def run_worker(args: argparse.Namespace) -> int:
    """Train the run `args` (backend.training.cli.parse_args) names; returns the exit code."""
    stop = StopRequest().install()  # first: a stop during the slow loading still ends cleanly
    stop.end_at_once = True  # until the first step begins (GracefulStop): nothing to save before it
    hold_library_logs()  # until the run folder is known: then debug.log, not train.log
    job = None
    try:
        job = prepare_job(args)
        skip_bitsandbytes(job.config)  # a process of its own, before peft is imported
        create_run_dir(job)
        setup_logging(job)
        mark_running(job)
        if job.config.ray_address:  # this process is Ray's driver; the workers train
            from backend.training.ray_run import run_on_ray

            stop.end_at_once = False  # Ray's own stop: the driver tells its workers (ray_run.py)
            return run_on_ray(job, stop)
        from backend.training.session import build, finish, train  # torch: after the cheap checks

        session = build(job, stop)
        final_state = train(session, stop)
        stop.end_at_once = False  # final/ and summary.json are written whatever comes now
        return finish(session, final_state)
    except StoppedBeforeFirstStep:
        return stopped_before_first_step(job)
    except BuildStopped:  # Stop while the demo model was being built: nothing to save
        return stopped_during_build(job.run_dir if job and job.is_main else None)
    except Exception as error:  # every failure ends as error + advice in status.json
        stop.end_at_once = False
        return fail(job, error, args.resume or args.run_dir)
    finally:
        stop.end_at_once = False
        announce(job, args)


def stopped_before_first_step(job) -> int:
    """The worker's end when Stop came before its first step: `stopped` with nothing trained (since the
    resume, for a resumed run, whose checkpoints stay as they were)."""
    resumed = job is not None and job.resuming and job.resume_from is not None
    advice = (msg("train.advice.stopped_before_first_step_resumed", checkpoint=job.resume_from.name) if resumed
              else msg("train.advice.stopped_before_first_step"))
    logging.getLogger("backend.train").info("stopped before the first step: %s", advice)
    if job is not None and job.is_main and job.run_dir.is_dir():
        update_status(job.run_dir, state="stopped", exit_code=0, ended_at=time.time(), error=None,
                      error_message=None, advice=str(advice), advice_message=advice.to_dict())
    return 0


def announce(job, args: argparse.Namespace) -> None:
    """Rank 0 tells the workspace's webhook that the run ended (backend/runs/notify.py starts a
    detached sender, so this process exits now and frees its devices whatever the webhook does).
    A speed probe's scratch run lies outside workspace/runs and announces nothing."""
    if (job.is_main if job is not None else int(os.environ.get("RANK", "0")) == 0):
        run_dir = job.run_dir if job is not None else (args.resume or args.run_dir)
        if run_dir is not None:
            announce_end(run_dir)


def mark_running(job) -> None:
    """status.json at start; keeps what the run store wrote (pid, command, devices...)."""
    for warning in job.warnings:
        logging.getLogger("backend.train").warning(str(warning))
    if not job.is_main:
        return
    me = psutil.Process()
    fields = {"state": "running", "worker_pid": os.getpid(), "pgid": os.getpgid(0),
              "create_time": me.create_time(), "worker_started_at": time.time(),
              "exit_code": None, "error": None, "advice": None, "ended_at": None, "plan_warning": None,
              "train_warning": None}
    recorded = read_status(job.run_dir)
    if not recorded.get("pid"):
        fields["pid"] = os.getpid()
    if (recorded.get("stop_requested_at") or 0) < me.create_time():  # a stop sent to an earlier process
        fields.update(stop_requested_at=None, stop_note=None)
    if job.resuming:
        fields["resumed_from"] = job.resume_from.name if job.resume_from else None
        # Shown above the running run in the Runs tab (in the user's language), not only in train.log.
        fields["resume_warnings"] = [w.to_dict() if isinstance(w, Message) else str(w) for w in job.warnings]
    update_status(job.run_dir, **fields)
