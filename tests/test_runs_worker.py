"""RunStore driving the real worker (python -m backend.train) on the demo
model: complete runs, stop / resume, kill -9, a half-written checkpoint, an
app restart, one job per device, and the 2-process torchrun path."""

from __future__ import annotations

import json
import os
import signal

import pytest

from backend.config import RunConfig
from backend.config_recipes import tiny_config
from backend.runs.files import COMPLETE_MARKER, FINAL_STATES, read_status
from backend.runs.store import RunError, RunInfo, RunStore
from tests.callback_runs import LIBRARY_LINES, PROJECT_LINE
from tests.polling import wait_for

pytestmark = pytest.mark.slow

HOLD = "tests.callback_runs:HoldWhileFileExists"
MAX_STEPS = 8


@pytest.fixture
def store(workspace, subprocess_env, devices):
    return RunStore(workspace, devices=devices, env=subprocess_env)


def small_config(**kw) -> RunConfig:
    # fp32 on the CPU: a resumed run can match an uninterrupted one closely.
    settings = dict(devices="cpu", precision="fp32", max_steps=MAX_STEPS, save_steps=2, logging_steps=1,
                    per_device_train_batch_size=4, cutoff_len=128, lora_r=8, seed=7, save_total_limit=None)
    return tiny_config(**{**settings, **kw})


def wait_final(store: RunStore, run_id: str) -> RunInfo:
    def ended():
        info = store.get(run_id)
        return info if info.state in (*FINAL_STATES, "lost") else None
    return wait_for(ended, f"run {run_id} to end")


def start_held(store: RunStore, config: RunConfig) -> str:
    """Start a run that waits after step 3 (checkpoint-2 complete) until released."""
    run_id = store.create(config)
    run_dir = store.runs_dir / run_id
    (run_dir / ".hold").touch()
    store.start(run_id)
    wait_for(lambda: (run_dir / ".held").exists() or store.get(run_id).state != "running", "the worker to hold")
    assert store.get(run_id).state == "running", (run_dir / "train.log").read_text()[-3000:]
    return run_id


def metrics(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def train_losses(records: list[dict]) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records if r["kind"] == "train" and "loss" in r}


def log_of(info: RunInfo) -> str:
    return (info.run_dir / "train.log").read_text()[-3000:]


def test_the_libraries_lines_go_to_debug_log_and_train_log_keeps_the_projects(store):
    """train.log is what the user reads; the libraries' warnings there read as failures."""
    info = wait_final(store, store.launch(small_config(max_steps=2, callbacks=["tests.callback_runs:LibraryLines"])))
    assert info.state == "completed", log_of(info)
    train_log, debug_log = (info.run_dir / "train.log").read_text(), (info.run_dir / "debug.log").read_text()
    assert PROJECT_LINE in train_log and "INFO step 2/2" in train_log
    for line in LIBRARY_LINES.values():
        assert line in debug_log and line not in train_log, (line, train_log[-3000:])
    assert "FutureWarning" not in train_log and "kernels-community" not in train_log  # the real ones too


def test_stop_kill_and_resume_end_like_an_uninterrupted_run(store, workspace, subprocess_env, devices):
    reference = wait_final(store, store.launch(small_config()))
    assert reference.state == "completed", log_of(reference)
    assert reference.global_step == MAX_STEPS and reference.progress == 1.0
    assert [c.step for c in reference.checkpoints] == [2, 4, 6, 8]
    assert reference.best_eval_loss is not None
    for name in ("config.yaml", "status.json", "train.log", "metrics.jsonl", "summary.json", "final/COMPLETE"):
        assert (reference.run_dir / name).exists(), name
    assert read_status(reference.run_dir)["exit_code"] == 0

    # Stop, from a store that did not start the worker (the app restarted).
    run_id = start_held(store, small_config(callbacks=[HOLD]))
    run_dir = store.runs_dir / run_id
    with pytest.raises(RunError, match=f"cpu is busy with run {run_id}"):
        store.launch(small_config())
    restarted = RunStore(workspace, devices=devices, env=subprocess_env)
    assert restarted.get(run_id).state == "running"
    restarted.stop(run_id)
    (run_dir / ".hold").unlink()
    stopped = wait_final(restarted, run_id)
    assert stopped.state == "stopped", log_of(stopped)
    assert 3 <= stopped.global_step < MAX_STEPS - 1
    assert stopped.checkpoints[-1].step == stopped.global_step  # saved at the step boundary

    # A resume that changes the adapter shape: the worker refuses, the run says why.
    restarted.resume(run_id, ["lora_r=4"])
    refused = wait_final(restarted, run_id)
    assert refused.state == "failed" and "different model or adapter shape" in refused.error, log_of(refused)

    # Resume, then kill -9 the worker's group in the middle of a real save. The checkpoint's
    # optimizer.pt is a named pipe nobody reads: the save writes the adapter, then blocks
    # opening that file, so once the adapter is there the worker is provably mid-save.
    # The pipe goes in while the resumed worker holds after its first step (a resume first
    # clears incomplete checkpoint folders, so an earlier one would be gone).
    (run_dir / ".held").unlink()
    (run_dir / ".hold").touch()
    restarted.resume(run_id)
    wait_for(lambda: (run_dir / ".held").exists(), "the resumed worker to hold")
    assert int((run_dir / ".held").read_text()) < 6
    saving = run_dir / "checkpoint-6"
    saving.mkdir()
    os.mkfifo(saving / "optimizer.pt")
    (run_dir / ".hold").unlink()
    wait_for(lambda: (saving / "adapter_model.safetensors").exists() or not restarted.get(run_id).live,
             "the resumed worker to write checkpoint-6")
    assert restarted.get(run_id).live, log_of(restarted.get(run_id))
    os.killpg(read_status(run_dir)["pgid"], signal.SIGKILL)
    lost = wait_for(lambda: (i := restarted.get(run_id)).state != "running" and i, "lost detection")
    assert lost.state == "lost"
    last = lost.checkpoints[-1].step
    assert last < 6 and f"Resume continues from checkpoint-{last}." in lost.error
    assert not (saving / COMPLETE_MARKER).exists()  # the interrupted save: files there, no marker
    half = saving

    seen = len(metrics(run_dir))
    restarted.resume(run_id)
    resumed = wait_final(restarted, run_id)
    assert resumed.state == "completed", log_of(resumed)
    assert resumed.global_step == MAX_STEPS
    after = [r["step"] for r in metrics(run_dir)[seen:] if r["kind"] == "train"]
    assert after[0] == last + 1  # continued from the last complete checkpoint
    assert (half / COMPLETE_MARKER).exists() and not (half / "optimizer.pt").is_fifo()  # saved afresh
    final_loss = train_losses(metrics(run_dir))[MAX_STEPS]
    assert final_loss == pytest.approx(train_losses(metrics(reference.run_dir))[MAX_STEPS], rel=1e-4)
    assert store.get(run_id).state == "completed"  # the first store reaps its child too


def test_torchrun_two_processes_write_one_consistent_run(store):
    info = wait_final(store, store.launch(small_config(num_processes=2, max_steps=4)))
    assert info.state == "completed", log_of(info)
    assert info.command[1:4] == ["-m", "torch.distributed.run", "--standalone"]
    assert read_status(info.run_dir)["world_size"] == 2
    steps = [r["step"] for r in metrics(info.run_dir) if r["kind"] == "train"]
    assert steps == [1, 2, 3, 4]  # rank 1 writes no lines
    assert [c.step for c in info.checkpoints] == [2, 4]
    assert (info.run_dir / "final" / COMPLETE_MARKER).exists()
    assert json.loads((info.run_dir / "summary.json").read_text())["world_size"] == 2
