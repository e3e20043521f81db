"""GPU selection: an explicit `devices` list ("1,2") reaches the worker as
CUDA_VISIBLE_DEVICES, and the worker validates the ORIGINAL indices while it
trains on cuda:0..N-1. No GPU here: the pure functions (env building, index
mapping) and a real launched process's environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from backend.config_recipes import tiny_config
from backend.models.hardware import LAUNCHED_DEVICES_ENV, Device, launch_env, local_indices, training_devices
from backend.runs.processes import devices_setting, launch_worker, wait_gone, worker_env

REPO = Path(__file__).resolve().parents[1]


def gpus(count: int) -> list[Device]:
    return [*[Device(f"cuda:{i}", f"GPU {i}", 80.0, True, True) for i in range(count)],
            Device("cpu", "CPU", 24.0, False, False)]


def test_explicit_list_becomes_cuda_visible_devices():
    assert launch_env("1,2", {}) == {"CUDA_VISIBLE_DEVICES": "1,2", LAUNCHED_DEVICES_ENV: "1,2"}
    assert launch_env("2, 0", {}) == {"CUDA_VISIBLE_DEVICES": "2,0", LAUNCHED_DEVICES_ENV: "2,0"}
    # auto / cpu pin nothing, and drop a stale marker inherited from the caller.
    assert launch_env("auto", {}) == launch_env("cpu", {}) == {LAUNCHED_DEVICES_ENV: None}


def test_launcher_that_sees_only_some_gpus_maps_through_its_own_list():
    # The UI runs with CUDA_VISIBLE_DEVICES=4,5,6: its cuda:1 and cuda:2 are machine GPUs 5 and 6.
    assert launch_env("1,2", {"CUDA_VISIBLE_DEVICES": "4,5,6"})["CUDA_VISIBLE_DEVICES"] == "5,6"
    with pytest.raises(ValueError, match="only 3 GPU"):
        launch_env("3", {"CUDA_VISIBLE_DEVICES": "4,5,6"})
    with pytest.raises(ValueError, match="GPU indices such as '0,1'"):
        launch_env("gpu1", {})


def test_worker_maps_original_indices_to_local_ones():
    launched = {"CUDA_VISIBLE_DEVICES": "1,2", LAUNCHED_DEVICES_ENV: "1,2"}
    assert local_indices("1,2", launched) == [0, 1]
    assert local_indices("2", launched) == [1]
    assert local_indices("1,2", {}) == [1, 2]  # nobody pinned: indices as given
    assert local_indices("auto", launched) is None
    with pytest.raises(ValueError, match="GPU 3 is not among the GPUs this worker was started on"):
        local_indices("3", launched)


def test_training_devices_under_the_launcher():
    # The worker with CUDA_VISIBLE_DEVICES=1,2 sees two GPUs: cuda:0 and cuda:1.
    launched = {"CUDA_VISIBLE_DEVICES": "1,2", LAUNCHED_DEVICES_ENV: "1,2"}
    assert [d.id for d in training_devices("1,2", gpus(2), launched)] == ["cuda:0", "cuda:1"]
    # Without the launcher (the UI deciding, all 4 GPUs visible) the indices are the machine's.
    assert [d.id for d in training_devices("1,2", gpus(4), {})] == ["cuda:1", "cuda:2"]
    with pytest.raises(ValueError, match="no such GPU cuda:2"):
        training_devices("1,2", gpus(2), {})
    assert [d.id for d in training_devices("auto", gpus(2), launched)] == ["cuda:0", "cuda:1"]


def test_worker_env_and_the_run_setting(tmp_path):
    env = worker_env({"PATH": "/bin", LAUNCHED_DEVICES_ENV: "7"}, "1,2")
    assert (env["CUDA_VISIBLE_DEVICES"], env[LAUNCHED_DEVICES_ENV]) == ("1,2", "1,2")
    env = worker_env({"PATH": "/bin", LAUNCHED_DEVICES_ENV: "7"}, "auto")
    assert "CUDA_VISIBLE_DEVICES" not in env and LAUNCHED_DEVICES_ENV not in env
    tiny_config(devices="1,2").save(tmp_path / "config.yaml")
    assert devices_setting(["-m", "backend.train", "--resume", str(tmp_path)], tmp_path) == "1,2"
    assert devices_setting(["--resume", str(tmp_path), "--set", "devices=3"], tmp_path) == "3"
    assert devices_setting([], tmp_path / "missing") == "auto"


@pytest.mark.usefixtures("starts_processes")
def test_launched_process_gets_the_chosen_gpus(tmp_path):
    tiny_config(devices="1,2").save(tmp_path / "config.yaml")
    show = "import os; print('PINNED', os.environ.get('CUDA_VISIBLE_DEVICES'), os.environ.get('FINETUNE_STUDIO_DEVICES'))"
    child = launch_worker([sys.executable, "-c", show], tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert wait_gone(child.pid, 0.0, 60, child) and child.returncode == 0
    assert "PINNED 1,2 1,2" in (tmp_path / "train.log").read_text()


@pytest.mark.usefixtures("starts_processes")
def test_worker_run_by_hand_pins_itself(tmp_path):
    # A fresh process: pinning must happen before torch is imported, as in `python -m backend.train`.
    script = """
import os, sys
from backend.config_policy import ConfigError
from backend.training.cli import pin_devices
os.environ.pop("CUDA_VISIBLE_DEVICES", None); os.environ.pop("FINETUNE_STUDIO_DEVICES", None)
pin_devices("1,2", os.environ)
print(os.environ["CUDA_VISIBLE_DEVICES"], os.environ["FINETUNE_STUDIO_DEVICES"], "torch" in sys.modules)
launched = {"CUDA_VISIBLE_DEVICES": "5", "FINETUNE_STUDIO_DEVICES": "1"}
pin_devices("2", launched)  # a launcher's pinning is kept; the worker's device check names the mismatch
print(launched["CUDA_VISIBLE_DEVICES"])
try:
    pin_devices("x", {})
except ConfigError as error:
    print("refused:", error)
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["1,2 1,2 False", "5"]
    assert lines[2].startswith("refused: devices='x'")


def test_the_cpu_bf16_check_reads_what_torchs_own_probes_see():
    """cpu_supports_bf16 reads the kernel's CPU flags (no torch import on a refusal's path); it must
    agree with torch's probes, which oneDNN's bf16 kernels follow."""
    import torch

    from backend.models.hardware import cpu_supports_bf16

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    assert cpu_supports_bf16() == any(getattr(torch.cpu, name, lambda: False)() for name in probes)
