"""A run started by hand (`python -m backend.train` without --queue), in this process: its folder is named as
the app names a run (time, then run_name or the method), and when a live run holds its devices it says that it
shares them and how to wait instead (the README once said such a start waits in the queue; it does not)."""

from __future__ import annotations

import os
import re

import psutil

from backend.runs.files import update_status
from backend.training.cli import create_run_dir, parse_args, prepare_job, shared_devices_warning


def by_hand(workspace, *sets: str):
    """The worker's path up to its run folder for `--recipe demo-tiny --set ...` (no --run-dir)."""
    argv = ["--workspace", str(workspace.root), "--recipe", "demo-tiny"]
    for item in sets:
        argv += ["--set", item]
    job = prepare_job(parse_args(argv))
    create_run_dir(job)
    return job


def test_a_run_started_by_hand_is_named_after_its_run_name_as_in_the_app(workspace):
    first = by_hand(workspace, "run_name=my-test")
    assert first.run_dir.parent == workspace.runs_dir.resolve() and (first.run_dir / "config.yaml").is_file()
    assert re.fullmatch(r"\d{8}-\d{6}-my-test", first.run_dir.name), first.run_dir.name
    again = by_hand(workspace, "run_name=my-test")  # the same second or not: a folder of its own
    assert again.run_dir != first.run_dir and re.fullmatch(r"\d{8}-\d{6}-my-test(-2)?", again.run_dir.name)
    assert re.fullmatch(r"\d{8}-\d{6}-lora", by_hand(workspace).run_dir.name)  # no run_name: the method


def test_a_run_started_by_hand_beside_a_live_run_says_it_shares_the_device(workspace):
    holder = workspace.runs_dir / "20260101-000000-holder"
    # A live run on the CPU: this test's own process stands for its worker (pid and start time).
    update_status(holder, state="running", pid=os.getpid(), create_time=psutil.Process().create_time(),
                  devices=["cpu"])
    job = by_hand(workspace, "run_name=beside")
    said = shared_devices_warning(job, ["cpu"])
    assert str(said) == ("cpu is also in use by run 20260101-000000-holder, which is running: this run started "
                         "beside it and shares it, so both train slower (on a GPU both may run out of memory). "
                         "To wait for it instead, start this run with --queue.")
    assert shared_devices_warning(job, ["cuda:1"]) is None  # another device: nothing shared
    update_status(holder, state="completed")
    assert shared_devices_warning(job, ["cpu"]) is None  # the holder ended
