"""The completion marker reaches the disk only after the checkpoint's files and folder do:
watched with strace on a real process, every file of the folder and the folder itself are fsynced
before the marker's rename."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")


def fsynced_before_marker(code: str, argument: Path, tmp_path: Path, timeout: int) -> list[str]:
    """Run `python -c code argument` under strace; the paths it fsynced before the COMPLETE marker's rename."""
    trace = tmp_path / "trace.txt"
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat,fsync,rename", "-o", str(trace), sys.executable, "-c",
                    code, str(argument)], cwd=REPO, check=True, timeout=timeout, env={"PYTHONPATH": str(REPO)})
    fds, synced, marker_at = {}, [], None
    for line in trace.read_text().splitlines():
        if (opened := re.search(r'openat\(.*?"([^"]+)".*\) = (\d+)$', line)):
            fds[opened.group(2)] = opened.group(1)
        elif (sync := re.search(r"fsync\((\d+)\)", line)) and marker_at is None:
            synced.append(fds.get(sync.group(1)))
        elif "rename(" in line and "COMPLETE" in line:
            marker_at = len(synced)
    assert marker_at is not None, trace.read_text()[-2000:]
    return [str(Path(p).resolve()) for p in synced if p]


@pytest.mark.usefixtures("starts_processes")
def test_files_and_folder_are_fsynced_before_the_marker(tmp_path):
    folder = tmp_path / "checkpoint-4"
    (folder / "sub").mkdir(parents=True)
    names = ["adapter_model.safetensors", "trainer_state.json", "optimizer.pt", "sub/tokenizer.json"]
    for name in names:
        (folder / name).write_bytes(b"x" * 64)
    code = "import sys; from backend.runs.files import mark_complete; mark_complete(sys.argv[1])"
    synced = set(fsynced_before_marker(code, folder, tmp_path, timeout=120))
    for name in [*names, "sub", "."]:
        assert str((folder / name).resolve()).rstrip("/.") in synced, (name, synced)
    assert (folder / "COMPLETE").is_file()


@pytest.mark.usefixtures("starts_processes")
def test_the_runs_log_and_metrics_are_fsynced_with_each_checkpoint(tmp_path):
    """CheckpointCallback.on_save (the worker's, with the real Trainer's state object) fsyncs train.log and
    metrics.jsonl before the checkpoint's marker: after a disk error they were 0 bytes beside an intact
    checkpoint."""
    run = tmp_path / "run"
    (run / "checkpoint-1").mkdir(parents=True)
    (run / "checkpoint-1" / "adapter_model.safetensors").write_bytes(b"x" * 64)
    (run / "train.log").write_text("step 1\n")
    (run / "metrics.jsonl").write_text('{"kind": "train", "step": 1}\n')
    code = ("import sys; from transformers import TrainerState; from backend.training.callbacks import "
            "CheckpointCallback; state = TrainerState(global_step=1); "
            "CheckpointCallback(sys.argv[1], None).on_save(None, state, None)")
    synced_paths = set(fsynced_before_marker(code, run, tmp_path, timeout=300))
    assert {str((run / name).resolve()) for name in ("train.log", "metrics.jsonl")} <= synced_paths, synced_paths
