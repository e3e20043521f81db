"""Models on this machine in the Export and Evaluate tabs (ui/local_model_choices.py): real tool layouts
(tests/local_model_stores.py: a hub-cache snapshot of the demo model, an Ollama store whose blob is the
SmolLM2 GGUF file) scanned into the workspace's cache, then the handlers called with the values a browser
sends, on a real LoRA run of the demo model, in English and Chinese. The merge into the hub-cache copy
and the benchmark beside the run's base run in this process."""

from __future__ import annotations

import json

import pytest

from backend.evaluation.benchmark_specs import BenchmarkError
from backend.evaluation.benchmark_tasks import FACTS_CHOICE
from backend.evaluation.benchmarks import load_benchmarks, local_benchmark_targets, run_benchmarks
from backend.export.exporter import export_checkpoint
from backend.models.gguf_source import SOURCE_FILE
from backend.models.loading import gguf_model_name
from backend.models.local.scan import scan_into_cache
from backend.runs.workspace import Workspace
from tests.eval_export_runs import cached_run, link_demo_model, one_torch_thread
from tests.local_model_stores import CPU_64, hub_snapshot, ollama_store, smollm2_gguf
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.panels import benchmark_panel
from ui.panels import local_models_panel as panel
from ui.tabs import evaluate, export

_ = one_torch_thread  # the fixture, imported for pytest to find


@pytest.fixture
def ctx(tmp_path, monkeypatch, demo_model_dir):
    """A workspace with a LoRA run of the demo model; this machine's hub cache holds the demo model and
    Ollama's store SmolLM2 (a GGUF file), scanned into the workspace's cache."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("HF_HOME", "XDG_CACHE_HOME", "LLAMA_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("OLLAMA_MODELS", str(ollama_store(tmp_path / "ollama", smollm2_gguf(tmp_path))))
    hub_snapshot(tmp_path / "hub", demo_model_dir)
    workspace = Workspace(tmp_path / "ws").ensure()
    link_demo_model(workspace, demo_model_dir)
    cached_run(workspace, demo_model_dir, "lora", "run-a")
    scan_into_cache(workspace.root, panel.places_of(workspace.root), CPU_64)
    return UIContext(workspace=workspace, texts=merge_texts(export.TEXT, evaluate.TEXT), i18n=None)


def _paths(ctx):
    snapshot = next((ctx.workspace.root.parent / "hub").glob("models--*/snapshots/*"))
    blob = next((ctx.workspace.root.parent / "ollama" / "blobs").iterdir())
    return snapshot, blob


def test_export_offers_the_hub_folder_and_a_gguf_model_only_once_converted(ctx, starter_model_dir):
    snapshot, blob = _paths(ctx)
    _, notes, base = export.describe(ctx, "en", "run-a", "final", "merged")
    assert [value for _, value in base["choices"]] == ["", str(snapshot)], base
    assert base["choices"][0][0] == "as the run loaded it: demo"
    assert base["choices"][1][0].startswith("FineTuneStudio/demo-tiny · Hugging Face · ")
    assert "1 GGUF model(s) found on this machine are not listed: not converted" in notes
    assert "1 个 GGUF 模型未列出" in export.describe(ctx, "zh", "run-a", "final", "merged")[1]
    assert export.describe(ctx, "en", "run-a", "final", "adapter")[1] == ""  # an adapter merges nothing

    # The folder the conversion makes of this very file in the workspace: the session's real conversion
    # of it (its files linked), with the source record the conversion writes last naming this blob (the
    # cached conversion's own names the file where the venv that made it found the package).
    folder = ctx.workspace.models_dir / gguf_model_name(blob)
    folder.mkdir()
    for file in starter_model_dir.iterdir():
        if file.name != SOURCE_FILE:
            (folder / file.name).symlink_to(file)
    stat = blob.resolve().stat()
    (folder / SOURCE_FILE).write_text(json.dumps({"path": str(blob.resolve()), "size": stat.st_size,
                                                  "mtime_ns": stat.st_mtime_ns}), encoding="utf-8")
    _, notes, base = export.describe(ctx, "en", "run-a", "final", "merged")
    assert base["choices"][-1] == ("smollm2:135m · Ollama · 98 MB", str(ctx.workspace.models_dir / gguf_model_name(blob)))
    assert "GGUF" not in notes


def test_a_base_of_another_architecture_is_refused_before_a_job_starts(ctx, starter_model_dir):
    said, job = export.start_job(ctx, "en", "run-a", "final", "merged", "into-smollm2", "2GB", "auto", False, False,
                                 str(starter_model_dir))
    assert job is None and said.startswith(f"Cannot export: The base {starter_model_dir} is not the model this "
                                           "adapter was trained on: it is llama (30 layers, hidden size 576), and "
                                           "the run's base demo is qwen2 (2 layers, hidden size 256)."), said
    said, _ = export.start_job(ctx, "zh", "run-a", "final", "merged", "into-smollm2", "2GB", "auto", False, False,
                               str(starter_model_dir))
    assert "不是该适配器训练时所用的模型" in said
    assert not (ctx.workspace.root / "exports" / ".jobs").exists()  # no process was started


@pytest.mark.usefixtures("one_torch_thread")
def test_a_merge_into_the_hub_cache_copy_of_the_base(ctx):
    snapshot, _ = _paths(ctx)
    hub = snapshot.parent.parent
    before = {p: p.lstat().st_mtime_ns for p in hub.rglob("*")}
    out = ctx.workspace.root / "exports" / "into-hub-copy"
    report = export_checkpoint(ctx.workspace.runs_dir / "run-a" / "final", out, merge=True, make_zip=False,
                               base=str(snapshot), workspace=ctx.workspace)
    assert report["base_folder"] == str(snapshot) and report["base_model"] == "FineTuneStudio/demo-tiny"
    assert report["verification"]["verdict"] == "passed", report["verification"]
    assert (out / "model.safetensors").is_file()
    assert {p: p.lstat().st_mtime_ns for p in hub.rglob("*")} == before  # the hub cache is only read


def test_evaluate_lists_what_transformers_can_load_and_refuses_what_is_no_model(ctx, tmp_path):
    snapshot, blob = _paths(ctx)
    listed = benchmark_panel.local_choices(ctx)["choices"]
    assert [value for _, value in listed] == [str(snapshot), str(blob)]
    assert listed[1][0] == "smollm2:135m · Ollama · 98 MB"
    # A GGUF file is named by its own metadata (general.name), not its blob digest.
    assert [name for name, _ in local_benchmark_targets([str(snapshot), str(blob), str(snapshot)])] == [
        "local-FineTuneStudio--demo-tiny", "local-Smollm2-135M-8k-Lc100K-Mix1-Ep2", "local-FineTuneStudio--demo-tiny-2"]
    nothing = tmp_path / "empty"
    nothing.mkdir()
    said = benchmark_panel.start(ctx, "en", "run-a", ["base"], [FACTS_CHOICE], "", 4, True, [str(nothing)])
    assert said == (f"Cannot run benchmarks: {nothing} is not a model on this machine that transformers can load: "
                    "give a model folder holding a config.json, or a GGUF file (converted once into this workspace).")
    assert "不是 transformers 能加载的本机模型" in benchmark_panel.start(ctx, "zh", "run-a", ["base"], [FACTS_CHOICE],
                                                                  "", 4, True, [str(nothing)])
    said = benchmark_panel.start(ctx, "en", "run-a", [], [FACTS_CHOICE], "", 4, True, [])
    assert said.startswith("Cannot run benchmarks: Choose at least one checkpoint")
    assert not (ctx.workspace.runs_dir / "run-a" / "eval" / "benchmark-progress.json").exists()  # nothing started


@pytest.mark.usefixtures("starts_processes", "one_torch_thread")
def test_a_local_copy_of_the_base_scores_what_the_base_scores(ctx):
    """The hub-cache snapshot holds the demo model's own files: beside the run's base it must answer alike.
    (lm-eval runs in this process, but it asks git for its version: a process, so the case is marked slow.)"""
    snapshot, _ = _paths(ctx)
    run_dir = ctx.workspace.runs_dir / "run-a"
    with pytest.raises(BenchmarkError):
        run_benchmarks(run_dir, [FACTS_CHOICE], ["base"], limit=8, local_models=[str(run_dir)])  # no model
    summary = run_benchmarks(run_dir, [FACTS_CHOICE], ["base"], limit=8, local_models=[str(snapshot)])
    results = load_benchmarks(run_dir)
    assert list(results) == ["base", "local-FineTuneStudio--demo-tiny"] == list(summary["results"])
    local, base = results["local-FineTuneStudio--demo-tiny"], results["base"]
    assert local["step"] is None and local["local_model"] == str(snapshot)
    assert local["tasks"][FACTS_CHOICE]["metrics"] == base["tasks"][FACTS_CHOICE]["metrics"]
    assert local["tasks"][FACTS_CHOICE]["samples"] == 8
    table, figure = benchmark_panel.results_view(run_dir)
    assert list(table["step"]) == [0, "–"]
    assert [shape.line.dash for shape in figure.layout.shapes] == ["dash"]  # the local model: a level line
