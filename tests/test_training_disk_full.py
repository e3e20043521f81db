"""A full disk, for real: the kernel's "No space left on device" (ENOSPC) is
produced by pointing the file a library is about to write at /dev/full, which
rejects every write with ENOSPC. So each library raises what it raises on a
full disk (safetensors a SafetensorError, tokenizers a bare Exception, Python
an OSError) and the app must recognise it, say which disk, clean up the
partial folder, and never fail to list runs."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from backend.config_recipes import tiny_config
from backend.models.hardware import Device
from backend.runs.files import FINAL_DIR, list_checkpoints, mark_complete, read_status, update_status
from backend.runs.store import RunStore
from backend.training.disk import DiskFullError, human_bytes, is_disk_full, remove_partial_saves
from backend.training.errors import explain
from tests.small_disk import run_on_small_disk, small_disk_available

FULL = Path("/dev/full")
pytestmark = pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full (Linux)")
needs_small_disk = pytest.mark.skipif(not small_disk_available(), reason="needs unshare -rm (user namespaces)")
CPU = Device("cpu", "CPU", 24.0, False, False)


def full_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(FULL)
    return path


LIBRARY_WRITES = """
import json, sys, torch
from pathlib import Path
from safetensors.torch import save_file
from backend.config import RunConfig
from backend.config_recipes import tiny_config
from backend.models.loading import load_tokenizer
from backend.training.disk import is_disk_full
from backend.training.errors import explain
from tests.small_disk import run_on_small_disk, small_disk_available
from tests.callback_runs import fill_disk

disk, model = Path(sys.argv[1]), sys.argv[2]
tokenizer = load_tokenizer(model)
fill_disk(disk / ".filler", 4096)
writes = {"safetensors": lambda: save_file({"w": torch.zeros(256, 256)}, str(disk / "a.safetensors")),
          "tokenizers": lambda: tokenizer.backend_tokenizer.save(str(disk / "tokenizer.json")),
          "transformers": lambda: tokenizer.save_pretrained(str(disk / "tok")),
          "python": lambda: (disk / "x.bin").write_bytes(b"x" * 2**20)}
for name, write in writes.items():
    try:
        write()
        print(json.dumps({"library": name, "raised": None}))
    except Exception as error:
        explained = explain(error, tiny_config(), disk)
        print(json.dumps({"library": name, "raised": type(error).__name__, "full": is_disk_full(error),
                          "error": explained.error, "advice": explained.advice}))
"""


@needs_small_disk
def test_each_librarys_disk_full_error_is_recognised(tmp_path, demo_model_dir, subprocess_env):
    import json

    disk = tmp_path / "disk"
    result = run_on_small_disk(disk, "8m", LIBRARY_WRITES, [str(disk), str(demo_model_dir)], subprocess_env)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = {r["library"]: r for r in map(json.loads, result.stdout.splitlines())}
    # What each library raises on a full disk: the reason a string match on OSError was not enough.
    assert seen["safetensors"]["raised"] == "SafetensorError" and seen["tokenizers"]["raised"] == "Exception"
    for record in seen.values():
        assert record["full"], record
        assert f"disk mounted at {disk}" in record["error"], record
        assert "train.log" not in record["advice"] and "kept" not in record["advice"], record
    assert not is_disk_full(RuntimeError("CUDA error: device-side assert triggered"))


def test_partial_saves_are_removed_and_advice_names_only_a_kept_checkpoint(tmp_path):
    run = tmp_path / "run"
    for step in (3, 6):
        (run / f"checkpoint-{step}").mkdir(parents=True)
        (run / f"checkpoint-{step}" / "adapter_model.safetensors").write_bytes(b"x" * 100)
    (run / FINAL_DIR).mkdir()
    no_kept = explain(OSError(28, "No space left on device"), tiny_config(), run)
    assert "no checkpoint was completed" in no_kept.advice and "kept" not in no_kept.advice
    mark_complete(run / "checkpoint-3")
    assert sorted(remove_partial_saves(run)) == ["checkpoint-6", "final"]
    assert [c.name for c in list_checkpoints(run, complete_only=False)] == ["checkpoint-3"]
    kept = explain(OSError(28, "No space left on device"), tiny_config(), run)
    assert "continues from checkpoint-3, which was kept" in kept.advice


def test_space_check_message_has_real_units(tmp_path):
    from backend.training.callbacks import DiskSpaceCallback

    with pytest.raises(DiskFullError) as error:
        DiskSpaceCallback(tmp_path, first_estimate_bytes=2**62).check(final=True)
    assert "final/ (the trained model) needs about" in str(error.value) and "0.00" not in str(error.value)
    assert human_bytes(3 * 2**20) == "3.0 MiB" and human_bytes(12) == "12 B" and human_bytes(5 * 2**40) == "5.0 TiB"


@pytest.mark.usefixtures("starts_processes")
def test_store_says_the_disk_is_full_when_status_json_cannot_be_written(tmp_path):
    """The worker ended (here: a program that exits without a final state) and
    the disk is too full for status.json: list() reports it instead of raising."""
    import subprocess

    store = RunStore(__import__("backend.runs.workspace", fromlist=["Workspace"]).Workspace(tmp_path / "ws").ensure(),
                     devices=[CPU])
    run_id = store.create(tiny_config(devices="cpu"))
    run_dir = store.runs_dir / run_id
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    update_status(run_dir, state="running", pid=child.pid, create_time=1.0)
    stray = run_dir / ".status.json.999999999.1.tmp"  # left by a writer that is gone
    stray.write_text("{")
    # The next status.json write of this thread lands on /dev/full: ENOSPC, as on a full disk.
    mine = full_file(run_dir / f".status.json.{os.getpid()}.{threading.get_ident()}.tmp")
    [info] = store.list()
    assert info.state == "lost" and "the disk is full" in info.error, info.error
    assert read_status(run_dir)["state"] == "running"  # nothing could be written
    assert not stray.exists() and not mine.exists() and not mine.is_symlink()
    assert store.get(run_id).state == "lost"  # and once the disk has space again, it is recorded
    assert read_status(run_dir)["state"] == "lost"


# Inside the namespace: a run whose disk fills up as training ends (before final/),
# then the same run resumed once the space is back. The run folder is copied out.
FULL_AT_FINAL = """
import json, shutil, subprocess, sys
from pathlib import Path
from backend.runs.files import read_status

runs, config, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
run = runs / "full-at-final"
run.mkdir()
(run / ".fill").touch()
worker = [sys.executable, "-m", "backend.train", "--workspace", str(runs.parent)]
first = subprocess.run([*worker, "--config", config, "--run-dir", str(run)], capture_output=True, text=True)
report = {"exit": first.returncode, "status": read_status(run), "files": sorted(p.name for p in run.iterdir()),
          "stderr": first.stderr[-3000:]}
(runs / ".filler").unlink(missing_ok=True)
second = subprocess.run([*worker, "--resume", str(run)], capture_output=True, text=True)
report.update(resume_exit=second.returncode, resume_stderr=second.stderr[-3000:])
shutil.copytree(run, out / run.name)
print(json.dumps(report))
"""


@pytest.mark.slow
@needs_small_disk
def test_disk_full_before_final_then_resume_finishes_without_training(workspace, subprocess_env, tmp_path):
    """The plan's last step ends mid-epoch (40 rows, batch 4, accumulation 3: 4 steps an epoch,
    6 steps). The disk fills before final/: a named-disk refusal, no partial final/, the
    checkpoint at step 6 kept. Resume writes final/ and the summary without a 7th step."""
    import json

    from backend.models.demo_facts import build_demo_rows

    data = workspace.root / "forty.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in build_demo_rows()[:40]))
    config = workspace.root / "run.yaml"
    tiny_config(dataset=str(data), max_steps=6, save_steps=3, per_device_train_batch_size=4,
              gradient_accumulation_steps=3, val_size=0, cutoff_len=64, logging_steps=1, devices="cpu",
              callbacks=["tests.callback_runs:FillDiskAtTrainEnd"]).save(config)
    out = tmp_path / "out"
    result = run_on_small_disk(workspace.runs_dir, "64m", FULL_AT_FINAL, [str(workspace.runs_dir), str(config), str(out)],
                               subprocess_env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    status = report["status"]
    assert report["exit"] == 1 and status["state"] == "failed", report["stderr"]
    assert f"disk mounted at {workspace.runs_dir}" in status["error"] and "final/" in status["error"], status
    assert "MiB" in status["error"] or "KiB" in status["error"]
    assert "continues from checkpoint-6, which was kept" in status["advice"]
    assert "final" not in report["files"] and "checkpoint-6" in report["files"]

    run = out / "full-at-final"
    assert report["resume_exit"] == 0, report["resume_stderr"]
    status = read_status(run)
    assert status["state"] == "completed" and status["global_step"] == 6, status
    assert (run / "final" / "COMPLETE").is_file() and (run / "summary.json").is_file()
    assert [c.name for c in list_checkpoints(run, complete_only=False)] == ["checkpoint-3", "checkpoint-6"]
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()
             if json.loads(line)["kind"] == "train"]
    assert steps == [1, 2, 3, 4, 5, 6]
    assert "writing final/ without training further" in (run / "train.log").read_text()
