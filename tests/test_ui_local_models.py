"""Models on this machine in the UI (ui/panels/local_models_panel.py beside the Train tab's picker,
ui/panels/model_folders_panel.py in Settings): the handlers called with the values a browser sends, over a
real Ollama store and an added folder, in English and Chinese."""

from __future__ import annotations

import json

import pytest

from backend.models.local.scan import LOCK_FILE, PROGRESS_FILE, scan_cache_dir, scan_into_cache, start_background_scan
from backend.runs.workspace import Workspace
from backend.storage.file_lock import file_lock, try_file_lock
from tests.local_model_stores import CPU_64, ollama_store, own_home, smollm2_gguf
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.panels import local_models_panel as panel
from ui.panels import model_folders_panel
from ui.tabs import settings

BASE = [("Tiny demo model (2M, tests) · demo", "demo")]


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    """A workspace and a home of its own; Ollama's store holds SmolLM2 and one broken manifest."""
    own_home(tmp_path, monkeypatch)
    store = ollama_store(tmp_path / "ollama", smollm2_gguf(tmp_path))
    (store / "manifests" / "registry.ollama.ai" / "library" / "smollm2" / "broken").write_text("{")
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    workspace = Workspace(tmp_path / "ws").ensure()
    return UIContext(workspace=workspace, texts=merge_texts(settings.TEXT, panel.TEXT), i18n=None)


def scanned(ctx):
    return scan_into_cache(ctx.workspace.root, panel.places_of(ctx.workspace.root), CPU_64)


def test_before_any_scan_the_picker_keeps_its_own_choices(ctx):
    assert panel.view(ctx.workspace.root, "en") == ("Not scanned yet.", "", False)
    assert panel.choices(ctx.workspace.root, BASE) == BASE


def test_the_trainable_models_join_the_picker_and_the_table_names_each_with_its_facts(ctx):
    scanned(ctx)
    root = ctx.workspace.root
    blob = next((ctx.workspace.root.parent / "ollama" / "blobs").iterdir())
    assert panel.choices(root, BASE) == [*BASE, ("smollm2:135m · Ollama · 98 MB", str(blob))]
    status, table, polling = panel.view(root, "en")
    assert status.startswith("1 model(s) found, 1 trainable") and not polling
    assert "| smollm2:135m | Ollama | 98 MB | llama | 135M | Q4_1 | apache-2.0 | yes, about" in table
    assert "Skipped (1):" in table and "is not an Ollama manifest" in table
    status, table, _ = panel.view(root, "zh")
    assert status.startswith("找到 1 个模型，其中 1 个可训练") and "| 名称 | 来源 |" in table
    assert "已跳过（1 个）" in table and "不是 Ollama 清单" in table


def test_an_untrainable_model_stays_out_of_the_picker_and_shows_its_reason(ctx, tmp_path):
    folder = tmp_path / "mine" / "half-downloaded"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8}))
    ctx.remember(model_folders=[str(tmp_path / "mine")])
    scanned(ctx)
    assert [value for _, value in panel.choices(ctx.workspace.root, BASE)][2:] == []
    assert "| half-downloaded | folder |" in panel.view(ctx.workspace.root, "en")[1]
    assert "no: " in panel.view(ctx.workspace.root, "en")[1] and "holds no weights" in panel.view(ctx.workspace.root, "en")[1]
    assert "否: " in panel.view(ctx.workspace.root, "zh")[1] and "中没有权重" in panel.view(ctx.workspace.root, "zh")[1]


def test_while_a_scan_runs_the_panel_says_how_many_it_found_and_keeps_polling(ctx):
    folder = scan_cache_dir(ctx.workspace.root)
    lock = try_file_lock(folder / LOCK_FILE)  # what a running scan holds
    try:
        (folder / PROGRESS_FILE).write_text(json.dumps({"found": 3}))
        assert panel.view(ctx.workspace.root, "en")[0::2] == ("Scanning… 3 found", True)
        assert panel.view(ctx.workspace.root, "zh")[0] == "正在扫描…… 已找到 3 个"
        status, _, timer, picker = panel.refresh(ctx.workspace.root, "en", BASE, rescan=True)  # starts no second
        assert status == "Scanning… 3 found" and picker["choices"] == BASE
    finally:
        lock.close()


def test_rescan_in_the_background_fills_the_cache_the_view_reads(ctx):
    start_background_scan(ctx.workspace.root, panel.places_of(ctx.workspace.root)).join()
    status, _, timer, picker = panel.poll(ctx.workspace.root, "en", BASE)
    assert status.startswith("1 model(s) found") and [v for _, v in picker["choices"]][1].endswith("-" + "ab" * 32)


def test_settings_keeps_the_folders_rescans_and_lists_what_was_skipped(ctx, tmp_path):
    assert model_folders_panel in settings.SECTIONS
    missing = tmp_path / "not-here"
    message, _ = model_folders_panel.save(ctx, "en", f"{tmp_path / 'ollama'}\n\n{missing}\n{missing}\n")
    assert message.startswith("Saved 2 folder(s); scanning in the background.") and str(missing) in message
    assert ctx.saved()["model_folders"] == [str(tmp_path / "ollama"), str(missing)]
    assert model_folders_panel.saved_text(ctx) == f"{tmp_path / 'ollama'}\n{missing}"
    with file_lock(scan_cache_dir(ctx.workspace.root) / LOCK_FILE):  # waits for the background scan to end
        pass
    assert f"`{missing}`: {missing} does not exist or is not a folder" in model_folders_panel.skipped_view(ctx, "en")
    zh = model_folders_panel.skipped_view(ctx, "zh")
    assert "已跳过（2 个）" in zh and "不存在或不是文件夹" in zh
    assert model_folders_panel.save(ctx, "zh", "")[0].startswith("已保存 0 个文件夹")
    assert "model_folders" not in ctx.saved()
