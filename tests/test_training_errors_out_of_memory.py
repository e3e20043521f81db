"""A run that runs out of memory ends in a sentence that names memory, the run's estimate and the
settings to turn, whichever way it ends: the real worker meeting torch's CPU allocator failure
(a user callback asks for an impossible tensor), and a real worker killed by SIGKILL, which is
what the kernel's out-of-memory killer sends."""

from __future__ import annotations

import os
import signal

import pytest

from backend.config_recipes import tiny_config
from backend.models.hardware import detect_devices
from backend.runs.files import FINAL_STATES, read_status
from backend.runs.store import RunStore
from tests.polling import wait_for

pytestmark = pytest.mark.slow

KNOBS = ("per_device_train_batch_size 4 with gradient_accumulation_steps 2", "cutoff_len 64",
         "turn on gradient_checkpointing", "method qlora with quantization_bits 4")


@pytest.fixture
def store(workspace, subprocess_env):
    return RunStore(workspace, devices=detect_devices(), env=subprocess_env)


def small_config(**kw):
    return tiny_config(devices="cpu", max_steps=8, save_steps=2, logging_steps=1, per_device_train_batch_size=8,
                       cutoff_len=128, gradient_checkpointing=False, **kw)


def ended(store: RunStore, run_id: str):
    info = store.get(run_id)
    return info if info.state in (*FINAL_STATES, "lost") else None


def assert_names_memory_and_knobs(error: str, advice: str) -> None:
    assert "memory" in error and "The memory estimate for this run is about" in error and " GiB of the " in error
    for knob in KNOBS:
        assert knob in advice, advice
    assert advice.count("GiB") == len(KNOBS)  # each with the estimate it gives
    assert "train.log" not in error + advice


def test_a_cpu_allocator_failure_names_memory_the_estimate_and_the_knobs(store):
    run_id = store.launch(small_config(callbacks=["tests.callback_runs:AskForImpossibleMemory"]))
    info = wait_for(lambda: ended(store, run_id), "the worker to fail")
    assert info.state == "failed", (info.run_dir / "train.log").read_text()[-3000:]
    assert info.error.startswith("The worker ran out of memory: the machine's RAM was not enough "
                                 "(DefaultCPUAllocator: can't allocate memory"), info.error
    assert_names_memory_and_knobs(info.error, info.advice)


def test_a_worker_killed_by_sigkill_names_memory_the_estimate_and_the_knobs(store):
    run_id = store.create(small_config(callbacks=["tests.callback_runs:HoldWhileFileExists"]))
    run_dir = store.runs_dir / run_id
    (run_dir / ".hold").touch()
    store.start(run_id)
    wait_for(lambda: (run_dir / ".held").exists() or store.get(run_id).state != "running", "the worker to hold")
    assert store.get(run_id).state == "running", (run_dir / "train.log").read_text()[-3000:]
    os.kill(read_status(run_dir)["worker_pid"], signal.SIGKILL)  # as the kernel's OOM killer does
    info = wait_for(lambda: ended(store, run_id), "the store to see the worker gone")
    assert info.state == "lost"
    assert "killed by signal 9 (SIGKILL)" in info.error and "out-of-memory killer" in info.error
    assert "Resume continues from checkpoint-2." in info.error
    assert_names_memory_and_knobs(info.error, info.advice)
