"""A filesystem that turns read-only mid-run, for real: a tmpfs mounted in a
private mount namespace (tests/small_disk.py), a run folder with a complete
checkpoint on it, then `mount -o remount,ro`, as the kernel does after a disk
error. Every write then fails with EROFS, and what the user reads must say
read-only, not "free disk space"."""

from __future__ import annotations

import json

import pytest

from tests.small_disk import run_on_small_disk, small_disk_available

pytestmark = pytest.mark.skipif(not small_disk_available(), reason="needs unshare -rm (user namespaces)")

WRITES = """
import json, subprocess, sys, torch
from pathlib import Path
from safetensors.torch import save_file
from backend.config_recipes import tiny_config
from backend.runs.files import mark_complete, update_status
from backend.runs.store import _unwritable_status
from backend.training.errors import explain

disk = Path(sys.argv[1])
run = disk / "run"
(run / "checkpoint-3").mkdir(parents=True)
update_status(run, state="running")
mark_complete(run / "checkpoint-3")
subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
writes = {"safetensors": lambda: save_file({"w": torch.zeros(4)}, str(run / "checkpoint-6.safetensors")),
          "torch": lambda: torch.save({"w": 1}, run / "optimizer.pt"),
          "python": lambda: (run / "x.bin").write_bytes(b"x")}
for name, write in writes.items():
    try:
        write()
        print(json.dumps({"library": name, "raised": None}))
    except Exception as error:
        explained = explain(error, tiny_config(), run)
        print(json.dumps({"library": name, "raised": type(error).__name__, "error": explained.error,
                          "advice": explained.advice}))
try:
    update_status(run, state="failed")
except OSError as error:
    print(json.dumps({"library": "status.json", "raised": "OSError", "error": _unwritable_status(run, error, {}),
                      "advice": ""}))
"""


def test_a_read_only_filesystem_is_said_to_be_read_only(tmp_path, subprocess_env):
    disk = tmp_path / "disk"
    result = run_on_small_disk(disk, "8m", WRITES, [str(disk)], subprocess_env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = {r["library"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert set(seen) == {"safetensors", "torch", "python", "status.json"}, seen
    for name in ("safetensors", "torch", "python"):
        record = seen[name]
        assert record["raised"], record
        assert f"The disk mounted at {disk} is read-only" in record["error"], record
        assert "Free space" not in record["advice"] and "remount it read-write" in record["advice"], record
        assert "continues from checkpoint-3" in record["advice"], record
    status = seen["status.json"]["error"]
    assert "read-only" in status and "Free disk space" not in status and "remount it read-write" in status
