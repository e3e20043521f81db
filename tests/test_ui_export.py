"""The Export tab's handlers called with the values a browser sends, on real
LoRA and full runs of the demo model: lists, the default name and notes per
method, every refusal, and a real background adapter export whose report and
zip the tab shows (and shows again from disk, as after a page refresh)."""

from __future__ import annotations

import pytest

from backend.runs.workspace import Workspace
from tests.eval_export_runs import cached_run, link_demo_model
from tests.polling import wait_for
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.tabs import export

SKIP = {"__type__": "update"}


@pytest.fixture(scope="module")
def ctx(tmp_path_factory, demo_model_dir):
    workspace = Workspace(tmp_path_factory.mktemp("export-tab") / "ws").ensure()
    link_demo_model(workspace, demo_model_dir)
    cached_run(workspace, demo_model_dir, "lora", "run-a")
    cached_run(workspace, demo_model_dir, "full", "run-full")
    return UIContext(workspace=workspace, texts=merge_texts(export.TEXT), i18n=None)


def test_lists_keep_the_choice_and_default_to_the_newest_checkpoint(ctx):
    run, checkpoint = export.refresh_runs(ctx, "run-a", None)
    # Runs are listed most recently changed first; both were made in the same second or so.
    assert sorted(run["choices"]) == ["run-a", "run-full"] and run["value"] == "run-a"
    assert checkpoint["choices"] == ["checkpoint-8", "checkpoint-16", "final"] and checkpoint["value"] == "final"
    assert export.refresh_runs(ctx, "run-a", "checkpoint-8")[1]["value"] == "checkpoint-8"
    assert export.pick_run(ctx, "deleted")[0]["value"] == run["choices"][0]  # a run gone from disk: the newest
    assert export.pick_run(ctx, "run-a", "run-a") == (SKIP, SKIP)  # the run shown: the chosen checkpoint stays
    assert export.poll(ctx, "en", None) == (SKIP, SKIP)


def test_default_name_and_notes_follow_the_method(ctx, demo_model_dir):
    name, notes, base = export.describe(ctx, "en", "run-a", "checkpoint-16", "merged")
    assert name == "run-a-checkpoint-16-merged" and notes == ""
    assert base["choices"][0] == ("as the run loaded it: demo", "")  # empty: where the run loaded it
    assert export.describe(ctx, "en", "run-a", "final", "adapter")[0] == "run-a-final-adapter"
    name, notes, _ = export.describe(ctx, "zh", "run-full", "final", "merged")
    assert name == "run-full-final-model" and "全参数微调" in notes
    assert export.describe(ctx, "en", "run-a", None, "merged") == (SKIP, "", SKIP)


@pytest.mark.usefixtures("starts_processes")
def test_refusals_and_a_real_adapter_export_shown_again_from_disk(ctx):
    def start(name, replace=False, ckpt="checkpoint-8"):
        return export.start_job(ctx, "en", "run-a", ckpt, "adapter", name, "2GB", "auto", replace, True, "")

    assert start("x", ckpt=None) == ("Pick a run and a checkpoint first.", None)
    said, job = start("../outside")
    assert said.startswith("Cannot export:") and job is None
    said, job = start("run-a-adapter")
    assert said.startswith("Export started in the background") and job
    html, button = wait_for(lambda: (out := export.poll(ctx, "en", job)) and 'id="export-running"' not in out[0]
                            and out, "the export job to end")
    assert 'id="export-done"' in html, html
    assert button["visible"] and button["value"].endswith("run-a-adapter.zip")
    said, again = start("run-a-adapter")
    assert "already exists" in said and again is None  # Overwrite not ticked: nothing replaced

    listed, shown = export.last_jobs(ctx, None)   # a refreshed page finds the export on disk
    assert listed["choices"] == ["run-a-adapter"] and shown == job
    assert export.job_file(ctx, "run-a-adapter") == job and export.job_file(ctx, "../x") is None


def test_gguf_sizes_before_start_and_the_checks_after(gguf_run, gguf_export):
    """The GGUF part of the tab on the session's real GGUF export: sizes shown when levels are ticked,
    refusals before any process starts, and the report's per-level checks and Ollama line."""
    from backend.runs.workspace import Workspace

    workspace = Workspace(gguf_run.parent.parent)
    tab = UIContext(workspace=workspace, texts=merge_texts(export.TEXT), i18n=None)
    _, notes, _ = export.describe(tab, "en", gguf_run.name, "final", "merged", ["q4_k_m", "f16"])
    assert notes.startswith("GGUF sizes: q4_k_m ≈") and "f16 ≈ 71 MB" in notes
    said, job = export.start_job(tab, "en", gguf_run.name, "final", "merged", "x", "2GB", "auto", False, False, "",
                                 ["iq2_xs"], "none")
    assert job is None and "importance matrix" in said
    out, report = gguf_export
    view = export._gguf_view(tab, "zh", report["gguf"])
    assert 'id="export-gguf-check"' in view
    assert ("GGUF 检查通过" if report["gguf"]["passed"] else "GGUF 检查未通过") in view
    assert view.count("❌ ") == len(report["gguf"]["failed_levels"])  # each level that failed, flagged in its row
    assert view.count("<tr>") == 1 + len(report["gguf"]["files"]) and "ollama create assistant" in view


def test_the_checkpoint_defaults_to_the_best_and_follows_the_run_to_its_end(tmp_path, demo_model_dir):
    """A page opened at the run's first checkpoint kept offering it after the run ended with a better one."""
    import json

    from tests.eval_export_runs import hold_back_the_end

    workspace = Workspace(tmp_path / "ws").ensure()
    link_demo_model(workspace, demo_model_dir)
    run_dir = cached_run(workspace, demo_model_dir, "lora", "run-b")
    summary = json.loads((run_dir / "summary.json").read_text())
    ctx = UIContext(workspace=workspace, texts=merge_texts(export.TEXT), i18n=None)
    assert export.refresh_runs(ctx, "run-b", None)[1]["value"] == "final"  # no eval: final/
    best = "checkpoint-16"  # as the worker writes it at the end, from the eval lines
    (run_dir / "summary.json").write_text(json.dumps({**summary, "best_checkpoint": best, "best_eval_loss": 1.5}))
    assert export.refresh_runs(ctx, "run-b", None)[1]["value"] == best  # the best, not final/
    put_back = hold_back_the_end(run_dir, tmp_path / "aside")
    _, opened = export.refresh_runs(ctx, "run-b", None)  # the page opens mid-run
    assert opened["choices"] == ["checkpoint-8"] and opened["value"] == "checkpoint-8"
    listed, seen = export.refresh_checkpoints(ctx, "run-b", "checkpoint-8", None)
    assert export.refresh_checkpoints(ctx, "run-b", "checkpoint-8", seen) == (SKIP, seen)  # nothing new
    put_back()  # the run goes on and ends
    listed, seen = export.refresh_checkpoints(ctx, "run-b", "checkpoint-8", seen)
    assert listed["choices"] == ["checkpoint-8", "checkpoint-16", "final"] and listed["value"] == best
    # A checkpoint the user picked stays picked when the list changes: the page keeps it (no value sent).
    (run_dir / "final").rename(tmp_path / "final-aside")
    kept = export.refresh_checkpoints(ctx, "run-b", "checkpoint-8", seen)[0]
    assert "value" not in kept and kept["choices"] == ["checkpoint-8", "checkpoint-16"]
