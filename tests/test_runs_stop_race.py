"""The stop/refresh race: one RunStore sends a Stop, another (the Chat tab made a
fresh store on every 5 s refresh) looks at the run during the stop's grace period
and after the process ends. A store that did not send the stop must still
record `stopped`, never `lost`: the stop request lives in status.json.

The worker is a real stand-in process launched the way the store launches a
worker: on SIGTERM it says it is saving and waits for the test's release file
(a checkpoint save as long as the test wants, no timing involved), then exits
without recording a final state, as a worker killed mid-save would."""

from __future__ import annotations

import sys

import pytest

from backend.config_recipes import tiny_config
from backend.runs.files import read_status
from backend.runs.store import RunStore
from backend.runs.workspace import Workspace
from tests.polling import wait_for

SAVER = """
import pathlib, signal, sys, time
release = pathlib.Path(sys.argv[1])
def stop(*_):
    print("saving", flush=True)
    while not release.exists():
        time.sleep(0.02)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(300)
"""


@pytest.mark.usefixtures("starts_processes")
def test_a_refresh_by_a_store_that_did_not_stop_says_stopped_not_lost(tmp_path, devices):
    workspace = Workspace(tmp_path / "ws").ensure()
    launcher = RunStore(workspace, devices=devices)
    run_id = launcher.create(tiny_config(devices="cpu", max_steps=4, save_steps=2))
    run_dir = launcher.runs_dir / run_id
    release = tmp_path / "release"
    launcher._launch(run_id, [sys.executable, "-c", SAVER, str(release)], {})
    log = run_dir / "train.log"
    wait_for(lambda: "ready" in log.read_text(), "the SIGTERM handler")

    stopper = RunStore(workspace, devices=devices)   # the tab whose Stop button was pressed
    stopper.stop(run_id, grace_s=600)                 # no escalation during the test: the worker ends itself
    wait_for(lambda: "saving" in log.read_text(), "the worker to start saving")

    # Grace period: a fresh store per refresh, as the Chat tab made, sees a live run holding the CPU.
    assert RunStore(workspace, devices=devices).busy_devices() == {"cpu": run_id}
    assert {i.run_id: i.state for i in RunStore(workspace, devices=devices).list()} == {run_id: "running"}

    release.touch()
    child = launcher._children[run_id]
    assert child.wait(timeout=300) == 0   # reaped here: the next look finds the pid gone
    # After the exit, the first store to look is a fresh one that never sent the stop.
    fresh = RunStore(workspace, devices=devices)
    assert fresh.busy_devices() == {}
    info = fresh.get(run_id)
    assert info.state == "stopped", read_status(run_dir)
    assert "ended after the stop request without recording it" in info.advice
    # Every other store, the stopper and the launcher included, reads the same end.
    assert [s.get(run_id).state for s in (stopper, launcher)] == ["stopped", "stopped"]
    assert read_status(run_dir)["state"] == "stopped"
