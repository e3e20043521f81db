"""The run queue (backend/runs/queue.py, scheduler.py, queue_wait.py) on real processes: real
workers on the demo model run one after another on one device; a run that fails in its worker
does not stop the next; a waiting run still starts after the processes serving the queue are
killed; cancel, reorder and Start now, with their refusals; two stores racing start a run once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pytest

from backend.config import RunConfig
from backend.config_recipes import tiny_config
from backend.runs import processes
from backend.runs.files import FINAL_STATES, read_status, update_status
from backend.runs.queue import (
    advance,
    blocker,
    cancel,
    enqueue,
    move,
    queue_order,
    queue_summary,
    start_now,
    waiting_runs,
)
from backend.runs.scheduler import QueueScheduler
from backend.runs.store import RunError, RunInfo, RunStore
from backend.training.estimate import estimate_run_seconds
from tests.polling import wait_for

pytestmark = pytest.mark.slow

HOLD = "tests.queue_holds:HoldWhileWorkspaceFlag"
REPO = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.fixture
def store(workspace, subprocess_env, devices):
    return RunStore(workspace, devices=devices, env=subprocess_env)


def short_config(**kw) -> RunConfig:
    settings = dict(devices="cpu", precision="fp32", max_steps=3, save_steps=3, logging_steps=1,
                    per_device_train_batch_size=4, cutoff_len=128, val_size=0.0)
    return tiny_config(**{**settings, **kw})


def failing_config(tmp_path, name: str) -> RunConfig:
    """Accepted by the queue; its worker exits 2 at once: the dataset file is not there."""
    return short_config(run_name=name, dataset=str(tmp_path / f"{name}-missing.jsonl"))


def wait_final(store: RunStore, run_id: str) -> RunInfo:
    def ended():
        info = store.get(run_id)
        return info if info.state in (*FINAL_STATES, "lost") else None
    return wait_for(ended, f"run {run_id} to end", limit_s=900)


def log_of(info: RunInfo) -> str:
    return (info.run_dir / "train.log").read_text()[-3000:]


def hold_device(store: RunStore) -> subprocess.Popen:
    """A plain process recorded as a running run on the CPU: the queue waits behind it until it is killed."""
    run_id = store.create(short_config(run_name="holder"))
    run_dir = store.runs_dir / run_id
    child = processes.launch_worker([sys.executable, "-c", "import time; time.sleep(600)"], run_dir)
    update_status(run_dir, state="running", pid=child.pid, pgid=child.pid,
                  create_time=processes.create_time(child.pid), started_at=time.time())
    child.run_id = run_id
    return child


def test_two_runs_on_one_device_complete_in_order_and_a_failing_one_between_does_not_block(store, tmp_path):
    first = enqueue(store, short_config(run_name="first"))
    bad = enqueue(store, failing_config(tmp_path, "bad"))
    second = enqueue(store, short_config(run_name="second"))
    assert store.get(first).state == "running" and not store.get(first).waiting
    assert store.get(bad).waiting and blocker(store, bad) == first and blocker(store, second) == bad
    entries = queue_order(store, estimate=estimate_run_seconds)
    assert [(e.info.run_id, e.position, e.waiting_behind) for e in entries] == [
        (first, None, None), (bad, 1, first), (second, 2, bad)]
    # Each starts when the one before it is estimated to end. The bad run's data cannot be read, so
    # it has no estimate: its end, and so the next start, are unknown rather than guessed.
    running, failing, last = entries
    assert running.estimated_end is not None and running.estimate_source != "unknown"
    assert failing.estimated_start == pytest.approx(running.estimated_end, abs=5)
    assert (failing.duration_s, failing.estimated_end, failing.estimate_source) == (None, None, "unknown")
    assert last.estimated_start is None and last.duration_s is not None and last.estimate_source != "unknown"

    scheduler = QueueScheduler(store, interval_s=0.5).start()
    try:
        done = [wait_final(store, run_id) for run_id in (first, bad, second)]
    finally:
        scheduler.stop()
    assert done[0].state == "completed", log_of(done[0])
    assert done[1].state == "failed" and "bad-missing.jsonl" in done[1].error, log_of(done[1])
    assert done[2].state == "completed", log_of(done[2])
    assert done[0].ended_at <= done[1].started_at and done[1].ended_at <= done[2].started_at  # one at a time, in order
    summary = queue_summary(store)
    assert (summary.completed, summary.waiting, summary.running) == (2, 0, 0)
    assert [run_id for run_id, _ in summary.failed] == [bad] and "bad-missing.jsonl" in summary.failed[0][1]


def test_the_waiting_run_still_starts_after_the_processes_serving_the_queue_are_killed(
        store, workspace, subprocess_env, devices, tmp_path):
    flag = workspace.root / ".hold"
    flag.touch()  # the first run holds after step 2 until the flag goes
    files = {}
    for name, callbacks in (("a", [HOLD]), ("b", [])):
        files[name] = tmp_path / f"{name}.yaml"
        short_config(run_name=f"cli-{name}", callbacks=callbacks).save(files[name])

    def queue_from_cli(name: str) -> subprocess.Popen:
        log = open(tmp_path / f"{name}.err", "w")  # noqa: SIM115 -- the child writes it; closed with the test
        return subprocess.Popen([sys.executable, "-m", "backend.train", "--config", str(files[name]),
                                 "--workspace", str(workspace.root), "--queue"],
                                cwd=REPO, env=subprocess_env, stdout=subprocess.DEVNULL, stderr=log)

    def run_named(name: str) -> str | None:
        return next((d.name for d in store.run_dirs() if d.name.endswith(f"-cli-{name}")), None)

    first_cli = queue_from_cli("a")
    second_cli = None
    try:
        a = wait_for(lambda: run_named("a"), "the first command to queue its run")
        wait_for(lambda: (store.runs_dir / a / ".held").exists() or store.get(a).state in (*FINAL_STATES, "lost"),
                 "run a to hold")
        assert store.get(a).state == "running", log_of(store.get(a))
        second_cli = queue_from_cli("b")
        b = wait_for(lambda: run_named("b"), "the second command to queue its run")
        wait_for(lambda: "queued behind run " + a in (tmp_path / "b.err").read_text(), "the second command's line")
        assert store.get(b).waiting
    finally:
        for cli in (first_cli, second_cli):  # a crash of everything serving the queue: no clean-up runs
            if cli is not None:
                cli.send_signal(signal.SIGKILL)
                cli.wait()
    assert store.get(a).state == "running" and store.get(b).waiting  # the worker is detached; the queue is on disk

    restarted = RunStore(workspace, devices=devices, env=subprocess_env)  # a new app process
    scheduler = QueueScheduler(restarted, interval_s=0.5).start()
    try:
        flag.unlink()
        done_a, done_b = wait_final(restarted, a), wait_final(restarted, b)
    finally:
        scheduler.stop()
    assert done_a.state == "completed", log_of(done_a)
    assert done_b.state == "completed", log_of(done_b)
    assert done_b.started_at >= done_a.ended_at


def test_cancel_reorder_and_start_now_with_their_refusals(store, tmp_path):
    holder = hold_device(store)
    try:
        b, c, d = (enqueue(store, failing_config(tmp_path, name)) for name in "bcd")
        assert waiting_runs(store) == [b, c, d]
        assert [move(store, d, "up"), move(store, d, "up"), move(store, d, "up")] == [2, 1, 1]  # first stays first
        assert move(store, b, "down") == 3
        assert waiting_runs(store) == [d, c, b]
        assert blocker(store, d) == holder.run_id and blocker(store, b) == c

        cancel(store, c)
        cancelled = store.get(c)
        assert cancelled.state == "stopped" and not cancelled.waiting and "never started" in cancelled.advice
        assert waiting_runs(store) == [d, b]
        for refused in (lambda: cancel(store, c), lambda: move(store, c, "up"), lambda: start_now(store, c)):
            with pytest.raises(RunError, match=f"Run {c} is not waiting in the queue"):
                refused()
        with pytest.raises(RunError, match="No run named"):
            cancel(store, "../elsewhere")
        with pytest.raises(RunError, match=f"cpu is busy with run {holder.run_id}"):
            start_now(store, b)  # its own devices are taken
        config_before = (store.runs_dir / b / "config.yaml").read_text()
        with pytest.raises(RunError, match="no such GPU cuda:7"):
            start_now(store, b, "7")
        with pytest.raises(RunError, match=f"cpu is busy with run {holder.run_id}"):
            start_now(store, b, "auto")  # other words for the same, busy device: config.yaml stays as it was
        assert (store.runs_dir / b / "config.yaml").read_text() == config_before and store.get(b).waiting
    finally:
        holder.kill()
        holder.wait()

    start_now(store, b, "cpu")  # the device is free: the last one jumps the queue
    assert not store.get(b).waiting and waiting_runs(store) == [d] and blocker(store, d) == b
    scheduler = QueueScheduler(store, interval_s=0.5).start()
    try:
        ended = {run_id: wait_final(store, run_id) for run_id in (b, d)}
    finally:
        scheduler.stop()
    assert all(info.state == "failed" for info in ended.values())
    assert ended[b].ended_at <= ended[d].started_at  # b (started now), then d
    assert not read_status(store.runs_dir / c).get("pid")  # the cancelled run never started
    summary = queue_summary(store)
    assert sorted(run_id for run_id, _ in summary.failed) == sorted([d, b]) and summary.stopped == 1


def test_stores_racing_to_start_one_waiting_run_start_it_once(workspace, devices):
    """Four stores (as in other app processes and command-line waiters) start the same waiting run at
    the same moment, two through the queue and two directly. The run holds no device, so only the
    status check under the launch lock keeps a second start out; the others are told it started."""
    stores = [RunStore(workspace, devices=devices) for _ in range(4)]
    holder = hold_device(stores[0])
    try:
        run_id = enqueue(stores[0], short_config(run_name="race"))
    finally:
        holder.kill()
        holder.wait()
    run_dir = workspace.runs_dir / run_id
    stub = f"import os, time; open({str(run_dir / 'launches')!r}, 'a').write(str(os.getpid()) + '\\n'); time.sleep(5)"
    update_status(run_dir, devices=[], command=[sys.executable, "-c", stub])
    go, refused = threading.Barrier(len(stores)), []

    def start(store: RunStore, through_queue: bool) -> None:
        go.wait()
        try:
            advance(store) if through_queue else store.start(run_id)
        except RunError as error:
            refused.append(str(error))

    threads = [threading.Thread(target=start, args=(s, n < 2)) for n, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    launches = wait_for(lambda: (run_dir / "launches").is_file() and (run_dir / "launches").read_text(),
                        "the stub to run")
    assert len(launches.split()) == 1, launches
    assert all(f"Run {run_id} was already started" in r for r in refused) and len(refused) <= 2


def test_the_queue_command_refuses_what_it_cannot_queue(workspace, subprocess_env, tmp_path):
    def queue_command(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "backend.train", "--workspace", str(workspace.root), "--queue",
                               *args], cwd=REPO, env=subprocess_env, capture_output=True, text=True)

    resumed = queue_command("--resume", str(tmp_path))
    assert resumed.returncode == 2 and "--queue puts a new run in the queue; it cannot be used with --resume" in resumed.stderr
    missing = queue_command("--config", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "nope.yaml does not exist" in missing.stderr
    config = tmp_path / "gpu.yaml"
    short_config(devices="7").save(config)
    no_gpu = queue_command("--config", str(config))
    assert no_gpu.returncode == 2 and "no such GPU cuda:7" in no_gpu.stderr
    assert [p for p in workspace.runs_dir.iterdir() if p.is_dir()] == []  # nothing queued (the lock files only)


def test_a_run_whose_status_cannot_start_fails_and_the_next_starts(workspace, devices):
    """A waiting run's status.json edited by hand (no command): it fails with a sentence instead of
    stopping the queue, and the run behind it starts."""
    store = RunStore(workspace, devices=devices)
    holder = hold_device(store)
    try:
        broken, next_one = (enqueue(store, short_config(run_name=name)) for name in ("broken", "next"))
    finally:
        holder.kill()
        holder.wait()
    status = read_status(store.runs_dir / broken)
    del status["command"]
    (store.runs_dir / broken / "status.json").write_text(json.dumps(status))
    stub = f"open({str(store.runs_dir / next_one / 'launches')!r}, 'a').write('started')"
    update_status(store.runs_dir / next_one, command=[sys.executable, "-c", stub])
    assert advance(store) == [next_one]
    failed = store.get(broken)
    assert failed.state == "failed" and f"Could not start the worker for {broken}" in failed.error
    assert [run_id for run_id, _ in queue_summary(store).failed] == [broken]
