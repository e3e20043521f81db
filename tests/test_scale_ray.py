"""Ray Train on this machine: `ray_address: local` starts a small local Ray
instance (no dashboard) and 2 CPU workers run the demo session inside
ray.train.torch.TorchTrainer. The run is started through the worker's command
line, then stopped, resumed, lost (its driver killed) and resumed again
through the run store; the run folder keeps its contract throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

from backend.config import RunConfig
from backend.runs.files import COMPLETE_MARKER, list_checkpoints, read_status
from backend.runs.store import RunStore
from backend.training.ray_run import STOP_FILE
from tests.conftest import REPO
from tests.polling import wait_for
from tests.test_runs_worker import HOLD, metrics, small_config, wait_final

pytestmark = pytest.mark.slow
STEPS = 6


def ray_config() -> RunConfig:
    # save_total_limit 1: each new checkpoint deletes the one before, which Ray's own snapshot
    # (checkpoint_manager_snapshot.json) still lists; every resume below must not mind.
    return small_config(ray_address="local", ray_num_workers=2, max_steps=STEPS, callbacks=[HOLD],
                        save_total_limit=1)


def hold_and_wait(run_dir, step_after: int, what: str) -> None:
    wait_for(lambda: (run_dir / ".held").exists() and int((run_dir / ".held").read_text() or 0) > step_after
             or read_status(run_dir).get("state") in ("completed", "stopped", "failed", "lost"), what)
    assert read_status(run_dir)["state"] == "running", (run_dir / "train.log").read_text()[-3000:]


def running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def group_members(pgid: int) -> list[psutil.Process]:
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and running(process):
                members.append(process)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return members


def ray_workers_since(started: float) -> list[psutil.Process]:
    """This run's Ray Train workers (processes Ray names ray::RayTrainWorker...)."""
    found = []
    for process in psutil.process_iter(["cmdline", "create_time"]):
        cmdline = process.info["cmdline"] or []
        if cmdline and cmdline[0].startswith("ray::RayTrainWorker") and process.info["create_time"] >= started:
            found.append(process)
    return found


def test_ray_train_through_the_cli_and_the_run_store(workspace, subprocess_env, tmp_path):
    config_file = tmp_path / "run.yaml"
    ray_config().save(config_file)
    run_dir = workspace.runs_dir / "ray-demo"
    run_dir.mkdir(parents=True)
    (run_dir / ".hold").touch()
    argv = [sys.executable, "-m", "backend.train", "--config", str(config_file), "--run-dir", str(run_dir)]
    with open(tmp_path / "cli.log", "wb") as log:  # the command a user types; the store did not start it
        cli = subprocess.Popen(argv, cwd=REPO, env=subprocess_env, stdin=subprocess.DEVNULL, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    hold_and_wait(run_dir, 0, "the Ray workers to reach step 3")
    status = read_status(run_dir)
    assert status["pid"] == cli.pid and status["world_size"] == 2

    store = RunStore(workspace, env=subprocess_env)
    assert store.get("ray-demo").state == "running"
    store.stop("ray-demo")  # SIGTERM to the driver, passed on to the workers
    wait_for(lambda: (run_dir / STOP_FILE).exists(), "the driver to pass the stop on")
    (run_dir / ".hold").unlink()
    stopped = wait_final(store, "ray-demo")
    assert cli.wait(timeout=300) == 0, (tmp_path / "cli.log").read_text()[-3000:]
    assert stopped.state == "stopped", (tmp_path / "cli.log").read_text()[-3000:]
    assert 3 <= stopped.global_step < STEPS and stopped.checkpoints[-1].step == stopped.global_step
    assert [c.step for c in stopped.checkpoints] == [stopped.global_step]  # checkpoint-2 went, Ray listed it

    # Resumed by the store, then its driver vanishes: the run is lost, nothing of it keeps running.
    (run_dir / ".held").unlink()
    (run_dir / ".hold").touch()
    store.resume("ray-demo")
    hold_and_wait(run_dir, stopped.global_step, "the resumed workers to hold")
    status = read_status(run_dir)
    workers = ray_workers_since(status["create_time"])
    assert len(workers) == 2
    os.kill(status["pid"], signal.SIGKILL)
    lost = wait_for(lambda: (i := store.get("ray-demo")).state != "running" and i, "lost detection")
    assert lost.state == "lost", lost.error
    assert f"Resume continues from checkpoint-{lost.checkpoints[-1].step}." in lost.error
    # Nothing of it keeps training: its local Ray instance and the workers go with the driver.
    wait_for(lambda: not group_members(status["pgid"]) and not [w for w in workers if running(w)],
             "the Ray instance of the vanished driver to go")
    (run_dir / ".hold").unlink()
    assert store.get("ray-demo").state == "lost"

    seen = len(metrics(run_dir))
    store.resume("ray-demo")
    done = wait_final(store, "ray-demo")
    assert done.state == "completed", (run_dir / "train.log").read_text()[-3000:]
    assert done.global_step == STEPS and read_status(run_dir)["world_size"] == 2
    steps = [r["step"] for r in metrics(run_dir)[seen:] if r["kind"] == "train"]
    assert steps[0] == lost.checkpoints[-1].step + 1 and steps[-1] == STEPS
    assert all((c / COMPLETE_MARKER).exists() for c in list_checkpoints(run_dir))
    assert (run_dir / "final" / COMPLETE_MARKER).exists() and (run_dir / "final" / "adapter_model.safetensors").exists()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["state"] == "completed" and summary["world_size"] == 2 and summary["global_step"] == STEPS
    log = (run_dir / "train.log").read_text()
    assert f"INFO step {STEPS}/{STEPS}" in log and "INFO saved checkpoint-" in log  # rank 0 writes train.log
    # Ray's own stream (its actors, the workers' stdout / stderr) is in ray.log: train.log is the user's.
    for noise in ("(RayTrainWorker", "(TrainController", "(PlacementGroupCleaner", "Failed to query Ray Train",
                  "LOAD_GLOBAL", "RETURN_VALUE", "Token authentication"):
        assert noise not in log, (noise, log[-3000:])
    assert log.count(f"INFO step {STEPS}/{STEPS}") == 1  # once: not also through Ray's stream
    ray_log = (run_dir / "ray.log").read_text()
    assert "(RayTrainWorker pid=" in ray_log and "(TrainController pid=" in ray_log, ray_log[-3000:]
    assert not (run_dir / ".stop-requested").exists()
