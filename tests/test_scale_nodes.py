"""Two torchrun "nodes" on this machine (two launchers, --nnodes 2, static
rendezvous on 127.0.0.1, gloo): node 0 started by the run store, node 1 from
the command the store shows for it. One run folder, written by global rank 0;
stop and resume go through both nodes; a node that goes away mid-run ends
node 0 with a sentence naming it; a node that never joins ends node 0 with a
sentence instead of a wait without end."""

from __future__ import annotations

import json
import signal
import socket
import subprocess

import psutil
import pytest

from backend.runs.files import COMPLETE_MARKER, read_status
from backend.runs.store import RunStore
from tests.conftest import REPO
from tests.polling import wait_for
from tests.test_runs_worker import HOLD, metrics, small_config, wait_final

pytestmark = pytest.mark.slow
STEPS = 6


@pytest.fixture
def store(workspace, subprocess_env):
    from backend.models.hardware import detect_devices

    return RunStore(workspace, devices=detect_devices(), env=subprocess_env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(argv: list[str], log, env: dict) -> subprocess.Popen:
    return subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def test_two_nodes_write_one_run_that_stops_and_resumes(store, subprocess_env, tmp_path):
    config = small_config(nnodes=2, master_addr="127.0.0.1", master_port=free_port(), max_steps=STEPS,
                          callbacks=[HOLD], node_join_timeout=240)
    run_id = store.create(config)
    run_dir = store.runs_dir / run_id
    status = read_status(run_dir)
    assert status["command"][1:3] == ["-m", "backend.runs.torchrun"] and "--node-rank=0" in status["command"]
    (node1_argv,) = status["node_commands"]
    assert node1_argv == [a.replace("--node-rank=0", "--node-rank=1") for a in status["command"]]
    (run_dir / ".hold").touch()
    store.start(run_id)
    with open(tmp_path / "node1.log", "ab") as log:
        node1 = start_node(node1_argv, log, subprocess_env)
    wait_for(lambda: (run_dir / ".held").exists() or store.get(run_id).state != "running", "both nodes to hold")
    store.stop(run_id)  # SIGTERM to node 0's rank; the ranks agree to stop over the process group
    (run_dir / ".hold").unlink()
    stopped = wait_final(store, run_id)
    assert node1.wait(timeout=300) == 0, (tmp_path / "node1.log").read_text()[-3000:]
    assert stopped.state == "stopped", (run_dir / "train.log").read_text()[-3000:]
    assert read_status(run_dir)["world_size"] == 2 and stopped.global_step < STEPS

    # Resumed, then node 1 goes away (its launcher and rank killed): node 0 ends with a sentence naming
    # node 1 and how to resume, not a raw gloo error and "See train.log".
    (run_dir / ".held").unlink()
    (run_dir / ".hold").touch()
    store.resume(run_id)
    (node1_resume,) = read_status(run_dir)["node_commands"]
    assert node1_resume[-2:] == ["--resume", str(run_dir)]
    with open(tmp_path / "node1.log", "ab") as log:
        node1 = start_node(node1_resume, log, subprocess_env)
    wait_for(lambda: (run_dir / ".held").exists() or store.get(run_id).state != "running", "the resumed nodes to hold")
    # The machine going down: the launcher and its rank (torchrun gives the rank a process group of its own).
    for process in [psutil.Process(node1.pid), *psutil.Process(node1.pid).children(recursive=True)]:
        process.send_signal(signal.SIGKILL)
    node1.wait(timeout=60)
    (run_dir / ".hold").unlink()
    broken = wait_final(store, run_id)
    assert broken.state == "failed", (run_dir / "train.log").read_text()[-3000:]
    assert broken.error.startswith("Node 1 of 2 went away"), broken.error
    advice = read_status(run_dir)["advice"]
    assert "Resume the run" in advice and "node_rank 1" in advice, advice
    assert "See train.log" not in advice

    seen = len(metrics(run_dir))
    store.resume(run_id)
    (node1_resume,) = read_status(run_dir)["node_commands"]
    with open(tmp_path / "node1.log", "ab") as log:
        node1 = start_node(node1_resume, log, subprocess_env)
    done = wait_final(store, run_id)
    assert node1.wait(timeout=300) == 0, (tmp_path / "node1.log").read_text()[-3000:]
    assert done.state == "completed", (run_dir / "train.log").read_text()[-3000:]
    assert done.global_step == STEPS
    steps = [r["step"] for r in metrics(run_dir) if r["kind"] == "train"]
    assert steps[steps.index(stopped.global_step) + 1] == stopped.global_step + 1  # continued, not restarted
    steps = [r["step"] for r in metrics(run_dir)[seen:] if r["kind"] == "train"]
    assert steps == sorted(set(steps)) and steps[-1] == STEPS  # one writer: global rank 0
    assert steps[0] == broken.checkpoints[-1].step + 1   # from the newest complete checkpoint
    assert (run_dir / "final" / COMPLETE_MARKER).exists()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_step"] == STEPS
    assert not list(run_dir.glob("*.log.*")) and sorted(p.name for p in run_dir.glob("checkpoint-*"))


def test_a_node_that_never_joins_ends_with_a_sentence(store):
    config = small_config(nnodes=2, master_addr="127.0.0.1", master_port=free_port(), node_join_timeout=2)
    info = wait_final(store, store.launch(config))
    assert info.state == "failed", (info.run_dir / "train.log").read_text()[-3000:]
    assert info.error.startswith("Not every node joined within 2 s: this run needs 2 nodes")
    status = read_status(info.run_dir)
    assert status["advice"].startswith("Start the command shown for each other node (node_rank 1 to 1)")
    assert "Traceback" not in (info.run_dir / "train.log").read_text()
