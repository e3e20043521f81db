"""RunStore and backend/runs/processes.py on real processes that are not the worker: the
process mechanics (identity, lost detection, device locking, stop
escalation, reaping) hold whatever program runs. The worker itself is
exercised in test_runs_worker.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from backend.config import RunConfig
from backend.config_recipes import tiny_config
from backend.runs import processes
from backend.runs.files import COMPLETE_MARKER, mark_complete, read_status, update_status
from backend.runs.store import RunError, RunStore
from backend.runs.workspace import Workspace
from tests.polling import wait_for

# A program that ignores SIGTERM: only the SIGKILL escalation can end it.
STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(120)")


@pytest.fixture
def store(tmp_path, devices):
    return RunStore(Workspace(tmp_path / "ws").ensure(), devices=devices)


def cpu_config(**kw) -> RunConfig:
    return tiny_config(devices="cpu", max_steps=4, save_steps=2, **kw)


def run_program(store: RunStore, run_id: str, code: str) -> subprocess.Popen:
    """Start `code` the way the store starts a worker and record it as running."""
    run_dir = store.runs_dir / run_id
    child = processes.launch_worker([sys.executable, "-c", code], run_dir)
    update_status(run_dir, state="running", pid=child.pid, pgid=child.pid,
                  create_time=processes.create_time(child.pid), started_at=time.time())
    return child


def test_create_writes_config_and_queued_status(store):
    config = cpu_config(run_name="my first run")
    run_id = store.create(config)
    run_dir = store.runs_dir / run_id
    assert RunConfig.load(run_dir / "config.yaml") == config
    status = read_status(run_dir)
    assert status["state"] == "queued" and status["run_id"] == run_id
    assert status["devices"] == ["cpu"] and status["model"] == "demo" and status["method"] == "lora"
    assert status["command"][1:] == ["-m", "backend.train", "--config", str(run_dir / "config.yaml"),
                                     "--run-dir", str(run_dir)]
    assert "my-first-run" in run_id
    info = store.get(run_id)
    assert info.state == "queued" and info.config == config and info.max_steps == 4 and info.progress == 0
    assert [i.run_id for i in store.list()] == [run_id]


def test_list_is_newest_first(store):
    first = store.create(cpu_config())
    update_status(store.runs_dir / first, created_at=time.time() - 60)
    second = store.create(cpu_config())
    assert first != second
    assert [i.run_id for i in store.list()] == [second, first]


def test_command_for_reproduces_the_run(store):
    config = cpu_config(learning_rate=1e-3)
    argv, text = store.command_for(config)
    assert argv == [sys.executable, "-m", "backend.train", "--config", "run.yaml",
                    "--workspace", str(store.workspace.root)]
    assert RunConfig.from_yaml(text) == config
    argv, _ = store.command_for(cpu_config(num_processes=2))
    assert argv[1:6] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m"]
    assert argv[6:9] == ["backend.train", "--config", "run.yaml"]


def test_unknown_gpu_is_refused_at_create(store):
    with pytest.raises(RunError, match="no such GPU cuda:7"):
        store.create(tiny_config(devices="7"))
    assert list(store.runs_dir.iterdir()) == []


@pytest.mark.usefixtures("starts_processes")
def test_live_run_holds_its_devices_then_is_lost_when_killed(store):
    run_id = store.create(cpu_config())
    child = run_program(store, run_id, "import time; time.sleep(120)")
    assert store.get(run_id).state == "running"
    assert store.busy_devices() == {"cpu": run_id}

    other = store.create(cpu_config())
    with pytest.raises(RunError, match=f"cpu is busy with run {run_id}"):
        store.start(other)
    with pytest.raises(RunError, match="busy with run"):
        store.launch(cpu_config())
    with pytest.raises(RunError, match="still running"):
        store.delete(run_id)

    os.killpg(child.pid, 9)
    child.wait()
    info = store.get(run_id)
    assert info.state == "lost"
    assert f"pid {child.pid}" in info.error and "start it again instead" in info.error
    assert store.busy_devices() == {}


@pytest.mark.usefixtures("starts_processes")
def test_zombie_child_counts_as_gone_and_is_reaped(store):
    run_id = store.create(cpu_config())
    run_dir = store.runs_dir / run_id
    # Started by the store itself, so the store is its parent and must reap it.
    store._launch(run_id, [sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"], {})
    pid = read_status(run_dir)["pid"]
    wait_for(lambda: psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, "the child to exit")
    info = store.get(run_id)
    assert info.state == "lost" and "killed by signal 9" in info.error
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


@pytest.mark.usefixtures("starts_processes")
def test_error_exit_becomes_failed_with_the_last_log_line(store):
    run_id = store.create(cpu_config())
    code = "import sys; print('loading'); print('Config error: lora_r must be above 0.'); sys.exit(2)"
    store._launch(run_id, [sys.executable, "-c", code], {})
    wait_for(lambda: store.get(run_id).state != "running", "the child to exit")
    info = store.get(run_id)
    assert info.state == "failed" and info.error == "Config error: lora_r must be above 0."
    assert read_status(info.run_dir)["exit_code"] == 2


def test_recycled_pid_is_not_the_worker(store):
    run_id = store.create(cpu_config())
    # A live pid (this test process) with another start time: the pid was reused.
    update_status(store.runs_dir / run_id, state="running", pid=os.getpid(),
                  create_time=psutil.Process().create_time() - 1000)
    assert store.get(run_id).state == "lost"
    assert store.busy_devices() == {}


def test_a_start_time_read_a_second_off_is_still_the_same_process(store):
    """psutil adds ticks since boot to the kernel's whole-second boot time, which steps by 1 as NTP slews
    the clock: the same live worker then reads a second later than the store recorded it."""
    run_id = store.create(cpu_config())
    update_status(store.runs_dir / run_id, state="running", pid=os.getpid(),
                  create_time=psutil.Process().create_time() - 1.0)
    assert store.get(run_id).state == "running"


def started_as_a_worker(run_dir, code: str) -> subprocess.Popen:
    """`code` started as the store starts a worker (a session of its own), recorded as the run's worker."""
    child = processes.launch_worker([sys.executable, "-c", code], run_dir)
    update_status(run_dir, state="running", pid=child.pid, pgid=child.pid,
                  create_time=processes.create_time(child.pid), started_at=time.time())
    return child


# Start `sleep` in the program's own process group and say its pid; then end, or stay beside it.
STARTS_A_SLEEP = "import subprocess; print(subprocess.Popen(['sleep', '120']).pid, flush=True)"
STAYS_WITH_A_SLEEP = STARTS_A_SLEEP + "; import time; time.sleep(120)"


def sleep_of(run_dir) -> psutil.Process:
    return psutil.Process(int(wait_for(lambda: (run_dir / "train.log").read_text().split(), "the sleep's pid")[0]))


def an_ended_process() -> tuple[int, float]:
    """(pid, start time) of a process that ran and ended: a run's vanished launcher or worker."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    started = processes.create_time(process.pid)
    process.wait()
    return process.pid, started


def alive(process: psutil.Process) -> bool:
    return process.is_running() and process.status() != psutil.STATUS_ZOMBIE


def assert_lost_leaving_the_group(store, run_id: str, leader: subprocess.Popen, sleeper: psutil.Process) -> None:
    """The run is lost, and the group of `leader` (not the run's: `sleeper` is in it) still lives."""
    try:
        assert store.get(run_id).state == "lost"
        assert alive(psutil.Process(leader.pid)) and alive(sleeper)
    finally:
        os.killpg(leader.pid, 9)
        leader.wait()


@pytest.mark.usefixtures("starts_processes")
def test_a_vanished_workers_leftovers_go_with_it(store):
    run_id = store.create(cpu_config())
    run_dir = store.runs_dir / run_id
    started_as_a_worker(run_dir, STARTS_A_SLEEP).wait()
    sleeper = sleep_of(run_dir)
    assert store.get(run_id).state == "lost"
    sleeper.wait(timeout=30)


@pytest.mark.usefixtures("starts_processes")
def test_a_vanished_rank_0s_leftovers_go_with_it_under_torchrun(store):
    """Under torchrun, rank 0 leads a group of its own, not the launcher's: it is the run's worker_pid."""
    run_id = store.create(cpu_config())
    run_dir = store.runs_dir / run_id
    launcher, launcher_started = an_ended_process()
    rank_0 = started_as_a_worker(run_dir, STARTS_A_SLEEP)
    update_status(run_dir, pid=launcher, launcher_create_time=launcher_started, worker_pid=rank_0.pid)
    rank_0.wait()
    sleeper = sleep_of(run_dir)
    assert store.get(run_id).state == "lost"
    sleeper.wait(timeout=30)


@pytest.mark.usefixtures("starts_processes")
def test_a_group_id_the_kernel_gave_to_another_program_is_left_alone(store):
    """The run's worker (its pid its group's id) vanished long ago and the kernel has given that id to a
    new program, which leads a group of it: cleaning up the vanished worker's leftovers kills none of it.
    (Under the suite, a resumed worker with an earlier run's pid was killed so.)"""
    run_id = store.create(cpu_config())
    run_dir = store.runs_dir / run_id
    program = started_as_a_worker(run_dir, STAYS_WITH_A_SLEEP)
    sleeper = sleep_of(run_dir)
    update_status(run_dir, create_time=processes.create_time(program.pid) - 100)  # the vanished worker's start
    assert_lost_leaving_the_group(store, run_id, program, sleeper)


@pytest.mark.usefixtures("starts_processes")
def test_a_worker_that_did_not_lead_its_group_leaves_the_groups_other_programs_alone(store):
    """A worker typed into a shell script shares the script's group: what the script starts after the
    worker ends is the script's, not the worker's leftovers."""
    run_id = store.create(cpu_config())
    run_dir = store.runs_dir / run_id
    worker, worker_started = an_ended_process()
    script = started_as_a_worker(run_dir, STAYS_WITH_A_SLEEP)
    sleeper = sleep_of(run_dir)
    update_status(run_dir, pid=worker, create_time=worker_started, pgid=script.pid)
    assert_lost_leaving_the_group(store, run_id, script, sleeper)


@pytest.mark.usefixtures("starts_processes")
def test_a_worker_starts_in_the_callers_folder(tmp_path, monkeypatch):
    # A relative path typed in the form (a dataset file) means what it meant to the app.
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    child = processes.launch_worker([sys.executable, "-c", "import os; print(os.getcwd())"], run_dir)
    assert child.wait(timeout=120) == 0
    assert (run_dir / "train.log").read_text().strip() == str(tmp_path)


@pytest.mark.usefixtures("starts_processes")
def test_new_store_reattaches_and_stop_escalates_to_kill(store, devices):
    run_id = store.create(cpu_config())
    run_dir = store.runs_dir / run_id
    mark_dir = run_dir / "checkpoint-2"
    mark_dir.mkdir()
    mark_complete(mark_dir)
    child = run_program(store, run_id, STUBBORN)
    wait_for(lambda: "ready" in (run_dir / "train.log").read_text(), "SIGTERM to be ignored")

    restarted = RunStore(store.workspace, devices=devices)  # an app restart: not our child any more
    assert restarted.get(run_id).state == "running"
    restarted.stop(run_id, grace_s=0.5)
    info = wait_for(lambda: (i := restarted.get(run_id)).state != "running" and i, "the kill")
    assert info.state == "stopped"
    assert "was killed" in info.advice and "Resume continues from checkpoint-2" in info.advice
    child.wait()
    assert child.returncode == -9
    with pytest.raises(RunError, match="not running"):
        restarted.stop(run_id)


def test_resume_refusals(store):
    run_id = store.create(cpu_config())
    with pytest.raises(RunError, match="never started; start it instead"):
        store.resume(run_id)
    run_dir = store.runs_dir / run_id
    update_status(run_dir, state="completed")
    with pytest.raises(RunError, match="completed; start a new run"):
        store.resume(run_id)
    update_status(run_dir, state="lost")
    (run_dir / "checkpoint-4").mkdir()  # half written: no marker
    with pytest.raises(RunError, match="no complete checkpoint.*start it again instead"):
        store.resume(run_id)
    (run_dir / "checkpoint-4" / COMPLETE_MARKER).write_text("{}")
    with pytest.raises(RunError, match="Unknown setting 'lora_rank'"):
        store.resume(run_id, ["lora_rank=8"])
    assert [c.step for c in store.get(run_id).checkpoints] == [4]


def test_start_twice_and_unknown_run(store):
    with pytest.raises(RunError, match="No run named '../etc'"):
        store.get("../etc")
    run_id = store.create(cpu_config())
    update_status(store.runs_dir / run_id, state="stopped")
    with pytest.raises(RunError, match="already started"):
        store.start(run_id)
    store.delete(run_id)
    assert not (store.runs_dir / run_id).exists()


@pytest.mark.usefixtures("starts_processes")
def test_rank_0_outliving_its_launcher_is_running_and_stoppable(store):
    """Under torchrun the worker records rank 0 as worker_pid; killed alone, the
    launcher leaves rank 0 training. It still holds the run and gets the stop."""
    run_id = store.create(cpu_config())
    run_dir = store.runs_dir / run_id
    launcher = subprocess.Popen([sys.executable, "-c", "pass"])
    launcher.wait()
    rank0 = run_program(store, run_id, "import signal, sys, time; "
                        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); print('ready', flush=True); "
                        "time.sleep(120)")
    wait_for(lambda: "ready" in (run_dir / "train.log").read_text(), "the SIGTERM handler")
    update_status(run_dir, pid=launcher.pid, launcher_create_time=time.time() - 5, worker_pid=rank0.pid)
    assert store.get(run_id).state == "running"
    assert store.busy_devices() == {"cpu": run_id}
    store.stop(run_id)
    assert rank0.wait(timeout=60) == 0  # ended by the SIGTERM handler, not killed
    info = store.get(run_id)
    assert info.state == "stopped" and "after the stop request" in info.advice


# Another app process (or a tab with its own store) that lists runs every 20 ms.
LISTER = """
import sys, time
from pathlib import Path
from backend.runs.store import RunStore
from backend.runs.workspace import Workspace
store = RunStore(Workspace(Path(sys.argv[1])), devices=[])
print("listing", flush=True)
while (state := {i.run_id: i.state for i in store.list()}[sys.argv[2]]) in ("queued", "running"):
    time.sleep(0.02)
print(state, flush=True)
"""
# A second app process that sends the stop and then waits for the run to end.
STOPPER = """
import sys, time
from pathlib import Path
from backend.runs.store import RunStore
from backend.runs.workspace import Workspace
store = RunStore(Workspace(Path(sys.argv[1])), devices=[])
store.stop(sys.argv[2], grace_s=1)
while (state := store.get(sys.argv[2]).state) in ("queued", "running"):
    time.sleep(0.1)
print(state, flush=True)
"""


@pytest.mark.usefixtures("starts_processes")
def test_a_stop_escalated_to_kill_is_stopped_for_every_store(store, tmp_path):
    """Launch here, stop (grace 1 s) from a second process while a third lists
    every 20 ms: the stop request is on disk, so the lister, which did not send
    it, still records `stopped` when the worker vanishes under the kill."""
    run_id = store.create(cpu_config())
    run_dir = store.runs_dir / run_id
    store._launch(run_id, [sys.executable, "-c", STUBBORN], {})
    wait_for(lambda: "ready" in (run_dir / "train.log").read_text(), "SIGTERM to be ignored")
    env = dict(os.environ, PYTHONPATH=str(processes.REPO_ROOT))
    root = str(store.workspace.root)
    lister = subprocess.Popen([sys.executable, "-c", LISTER, root, run_id], env=env, stdout=subprocess.PIPE, text=True)
    assert lister.stdout.readline().strip() == "listing"
    stopper = subprocess.run([sys.executable, "-c", STOPPER, root, run_id], env=env, capture_output=True, text=True,
                             timeout=300)
    assert stopper.returncode == 0, stopper.stderr
    listed, _ = lister.communicate(timeout=300)
    status = read_status(run_dir)
    assert (listed.strip(), stopper.stdout.strip(), status["state"]) == ("stopped", "stopped", "stopped"), status
    assert "was killed" in status["advice"]
    assert store.get(run_id).state == "stopped"


@pytest.mark.usefixtures("starts_processes")
def test_a_stop_sent_by_another_store_is_known_to_this_one(store, devices):
    """The stop request lives in status.json: a store that did not send it (the
    app restarted, another tab) records the end as `stopped`, not `lost`."""
    run_id = store.create(cpu_config())
    run_dir = store.runs_dir / run_id
    store._launch(run_id, [sys.executable, "-c", "import signal, sys, time; "
                           "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); print('ready', flush=True); "
                           "time.sleep(120)"], {})
    wait_for(lambda: "ready" in (run_dir / "train.log").read_text(), "the SIGTERM handler")
    other = RunStore(store.workspace, devices=devices)
    other.stop(run_id, grace_s=60)
    assert read_status(run_dir)["stop_requested_at"]
    del other  # its memory is gone: only the disk says a stop was asked for
    info = wait_for(lambda: (i := store.get(run_id)).state != "running" and i, "the worker to exit")
    assert info.state == "stopped" and "after the stop request" in info.advice


def test_stop_says_what_it_does_before_and_after_the_first_step(tmp_path):
    """Stop said "saves a checkpoint and exits" to a run still loading, which then was killed after 30 s
    with nothing saved. Before the first step of the worker's process it ends at once; after, it saves."""
    from backend.runs.store import stop_outcome
    from ui.i18n import localize

    started = time.time()
    loading = {"state": "running", "worker_started_at": started}
    assert stop_outcome(loading, [], 30).id == "run.stop.ends_now"
    resumed = {**loading, "first_step_at": started - 600}  # the step of the process before the resume
    assert stop_outcome(resumed, [tmp_path / "checkpoint-4"], 30).id == "run.stop.ends_now"
    stepping = {**loading, "first_step_at": started + 5}
    saves = stop_outcome(stepping, [tmp_path / "checkpoint-2", tmp_path / "checkpoint-4"], 30)
    assert str(saves) == ("it saves a checkpoint when the step it is on ends, then exits; if that takes more than "
                          "30 s it is killed, and Resume continues from checkpoint-4.")
    assert stop_outcome(stepping, [], 30).id == "run.stop.saves_first"
    assert "没有可保存的内容" in localize(stop_outcome(loading, [], 30), "zh")
