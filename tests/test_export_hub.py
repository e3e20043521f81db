"""A run on a hub model (a preset id) exports merged from the Export tab's job: the base
is found offline in the Hugging Face cache where training loaded it from, the model card
names the hub id (never a local path), and the job is found again from disk afterwards.

The "hub model" is the locally built demo model placed in a temporary HF cache in the
cache's own layout (blobs + snapshot symlinks + refs/main), with HF_HUB_OFFLINE=1."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest
import yaml

from backend.config_recipes import tiny_config
from backend.export.exporter import REPORT_FILE, start_export
from backend.export.outputs import ExportError, base_model_for
from backend.runs.files import read_status
from backend.runs.jobs import COMPLETED, RUNNING, read_progress
from backend.runs.workspace import Workspace
from tests.conftest import REPO
from tests.polling import wait_for

HUB_ID = "Qwen/Qwen2.5-0.5B-Instruct"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def place_in_hub_cache(model_dir, cache, hub_id: str):
    """Files of `model_dir` as huggingface_hub stores a download: blobs/<sha256>, snapshots/<commit>/<file>
    as relative symlinks to them, refs/main holding the commit."""
    repo = cache / f"models--{hub_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for file in sorted(model_dir.iterdir()):
        if not file.is_file():
            continue
        data = file.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT, encoding="utf-8")
    return snapshot


@pytest.fixture(scope="module")
def hub_run(tmp_path_factory, demo_model_dir, starts_processes):
    """A real worker run (2 steps) whose model_name_or_path is the hub id, trained offline from the cache."""
    root = tmp_path_factory.mktemp("hub")
    cache = root / "hf-home" / "hub"
    snapshot = place_in_hub_cache(demo_model_dir, cache, HUB_ID)
    hf_env = {"HF_HOME": str(root / "hf-home"), "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    workspace = Workspace(root / "workspace").ensure()
    config = tiny_config(model_name_or_path=HUB_ID, max_steps=2, save_steps=2, per_device_train_batch_size=4,
                       cutoff_len=64, lora_dropout=0.0, run_name="hub")
    config.save(root / "hub.yaml")
    run_dir = workspace.runs_dir / "hub-run"
    env = dict(os.environ, **hf_env, PYTHONPATH=str(REPO), TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-m", "backend.train", "--config", str(root / "hub.yaml"),
                             "--run-dir", str(run_dir), "--workspace", str(workspace.root)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    status = read_status(run_dir)
    assert result.returncode == 0 and status.get("state") == "completed", result.stderr[-3000:]
    return workspace, run_dir, snapshot, hf_env


def test_merged_export_of_a_hub_run_uses_the_hf_cache_and_names_the_hub_id(hub_run, monkeypatch, tmp_path):
    from ui.context import UIContext
    from ui.tabs.export import _report_view, last_jobs

    workspace, run_dir, snapshot, hf_env = hub_run
    for key, value in hf_env.items():
        monkeypatch.setenv(key, value)  # the job process inherits them, as it does from the app
    # The Export tab's path: a detached `python -m backend.export` job with a progress file.
    progress = start_export(workspace, run_dir / "final", "hub-merged", merge=True, make_zip=True)
    wait_for(lambda: read_progress(progress).get("state") != RUNNING, "the export job to end", 600)
    state = read_progress(progress)
    assert state["state"] == COMPLETED, (state.get("error"), progress.with_suffix(".log").read_text()[-3000:])
    report = state["result"]
    assert report["base_model"] == HUB_ID and report["base_folder"] == str(snapshot)
    assert report["verification"]["passed"], report["verification"]["summary"]

    out = workspace.root / "exports" / "hub-merged"
    card = (out / "README.md").read_text(encoding="utf-8")
    front = yaml.safe_load(card.split("---")[1])
    assert front["base_model"] == HUB_ID
    assert str(snapshot.parents[2]) not in card and str(workspace.root) not in card  # no local path anywhere
    assert f"from_pretrained({HUB_ID!r})" not in card  # merged: loads from this folder alone
    assert (out / REPORT_FILE).is_file()

    # A page opened later (refresh, app restart) finds the job on disk and shows its report and download.
    ctx = UIContext(workspace=workspace, texts=_texts(), i18n=None)
    dropdown, shown = last_jobs(ctx)
    assert dropdown["choices"] == ["hub-merged"] and shown == str(progress)
    html, button = _report_view(ctx, "en", progress)
    assert 'id="export-done"' in html and button["visible"] and button["value"].endswith("hub-merged.zip")


def test_hub_base_missing_from_the_cache_says_where_it_looked(hub_run, tmp_path, monkeypatch, demo_model_dir):
    from huggingface_hub import constants

    workspace, run_dir, snapshot, hf_env = hub_run
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(empty))  # what HF_HUB_CACHE=<empty> gives a fresh process
    with pytest.raises(ExportError, match=rf"not in the Hugging Face cache \({empty}\).*--base FOLDER"):
        base_model_for(run_dir / "final", run_dir, workspace, None, resolve=True)
    # A base given by hand (a folder copy of the hub model) is used, and the card still names the hub id.
    chosen = base_model_for(run_dir / "final", run_dir, workspace, str(demo_model_dir), resolve=True)
    assert chosen.path == str(demo_model_dir) and chosen.hub_id == HUB_ID


def _texts():
    from ui.tabs.export import TEXT

    return TEXT
