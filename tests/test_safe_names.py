"""Every file name built from user text stays inside the workspace: the saved
Train config, run folders, workspace datasets (UI and CLI), exports and the
data tab's suggested name, each fed the same hostile names."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.config_recipes import tiny_config
from backend.data.saved_datasets import save_dataset
from backend.export.exporter import start_export
from backend.export.outputs import ExportError
from backend.models.hardware import Device
from backend.runs.store import RunStore
from backend.storage.safe_names import UnsafeName, checked_name, clean_name, path_inside
from ui import forms
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.tabs import train
from ui.tabs.data import default_name

HOSTILE = ["../../../../outside/x", "/", "/etc/passwd", "..", ".", "a/../../b", "..\\..\\x", "", " ", ".hidden",
           "-rf", "x\x00y", "名字/../..", "~/x", "a" * 300, "名字 测试", "a\u200bb", "\u202egnp.exe", "a\uff0fb",
           "中" * 70]
# Names in other alphabets are names like any other: they stay as typed.
UNICODE = ["中文测试", "Größe", "Ärger", "हिन्दी", "Привет-мир", "日本語_v2.1"]
CPU = Device("cpu", "CPU", 24.0, False, False)


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")}


@pytest.fixture
def outside(tmp_path, workspace) -> Path:
    """Everything next to the workspace: nothing may appear here."""
    return tmp_path


def assert_only_inside(outside: Path, workspace, before: set[Path]) -> None:
    new = files_under(outside) - before
    strays = [p for p in new if not workspace.contains(p)]
    assert not strays, strays


@pytest.mark.parametrize("text", HOSTILE)
def test_clean_name_is_a_plain_child(text, tmp_path):
    name = clean_name(text, "fallback")
    assert name and "/" not in name and "\\" not in name and ".." not in name and not name.startswith((".", "-"))
    assert path_inside(tmp_path, name).parent == tmp_path
    with pytest.raises(UnsafeName):
        checked_name(text, "name")


@pytest.mark.parametrize("run_name", HOSTILE)
def test_train_tab_save_config_stays_in_configs(run_name, workspace, outside):
    ctx = UIContext(workspace=workspace, texts=merge_texts(train.TEXT), i18n=None)
    values = dict(zip(forms.NAMES, forms.form_values(tiny_config())))
    values["run_name"] = run_name
    before = files_under(outside)
    message, path = train.save_yaml(ctx, "en", "demo", "demo", *values.values())
    assert path, message
    assert Path(path).parent == workspace.root / "configs" and Path(path).is_file()
    assert_only_inside(outside, workspace, before)


@pytest.mark.parametrize("run_name", HOSTILE)
def test_run_folder_from_run_name_stays_in_runs(run_name, workspace, outside):
    before = files_under(outside)
    store = RunStore(workspace, devices=[CPU])
    run_id = store.create(tiny_config(devices="cpu", run_name=run_name))
    assert (workspace.runs_dir / run_id).resolve().parent == workspace.runs_dir.resolve()
    assert_only_inside(outside, workspace, before)


@pytest.mark.parametrize("name", HOSTILE)
def test_dataset_and_export_names_are_refused(name, workspace, outside):
    before = files_under(outside)
    with pytest.raises(ValueError, match="not allowed"):
        save_dataset(workspace.datasets_dir, name, [{"messages": []}], source={}, fixes=[], rows_before=1)
    with pytest.raises(ExportError, match="not allowed|too long"):
        start_export(workspace, workspace.runs_dir / "r" / "final", name, merge=False)
    assert_only_inside(outside, workspace, before)


@pytest.mark.parametrize("label", HOSTILE)
def test_suggested_dataset_name_is_savable(label):
    checked_name(default_name(label), "dataset name")


def test_data_cli_refuses_an_outside_name(workspace, subprocess_env, shared_data):
    import subprocess
    import sys

    source = next(p for p in sorted(shared_data.rglob("*.json*")) if p.is_file())
    result = subprocess.run([sys.executable, "-m", "backend.data", "fix", str(source), "--out", "../../outside",
                             "--workspace", str(workspace.root)], capture_output=True, text=True, env=subprocess_env,
                            cwd=Path(__file__).resolve().parents[1], timeout=300)
    assert result.returncode != 0 and "not allowed" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("name", UNICODE)
def test_unicode_names_stay_as_typed(name, tmp_path):
    assert clean_name(name, "fallback") == name
    assert checked_name(name, "name") == name
    assert path_inside(tmp_path, name).name == name


def test_a_decomposed_accent_names_the_same_folder():
    assert checked_name("Gro\u0308ße", "name") == "Größe" == clean_name("Gro\u0308ße", "x")


def test_a_name_too_long_in_bytes_is_refused_with_its_size(workspace):
    from backend.export.exporter import export_folder

    with pytest.raises(UnsafeName, match="210 bytes in UTF-8"):
        checked_name("中" * 70, "name", 100)
    with pytest.raises(ExportError, match="too long"):
        export_folder(workspace, "中" * 70)
    assert len(clean_name("中" * 300, "x", 300).encode()) <= 200


def test_chinese_run_name_keeps_its_folder_and_is_found(workspace):
    store = RunStore(workspace, devices=[CPU])
    run_id = store.create(tiny_config(devices="cpu", run_name="中文测试"))
    assert run_id.endswith("-中文测试")
    assert store.get(run_id).run_id == run_id and run_id in [info.run_id for info in store.list()]
    ctx = UIContext(workspace=workspace, texts=merge_texts(train.TEXT), i18n=None)
    values = dict(zip(forms.NAMES, forms.form_values(tiny_config())))
    values["run_name"] = "Größe"
    _, path = train.save_yaml(ctx, "en", "demo", "demo", *values.values())
    assert Path(path).name.startswith("Größe-")


def test_unicode_dataset_and_export_names_round_trip(workspace):
    from backend.data.saved_datasets import list_workspace_datasets
    from backend.export.exporter import export_folder
    from ui import data_session
    from ui.panels import vote_panel

    folder = save_dataset(workspace.datasets_dir, "中文测试", [{"messages": [{"role": "user", "content": "你好"},
                                                                          {"role": "assistant", "content": "你好！"}]}],
                          source={}, fixes=[], rows_before=1)
    assert folder.name == "中文测试" and [m["name"] for m in list_workspace_datasets(workspace.datasets_dir)] == ["中文测试"]
    assert data_session.dataset_source(workspace, "中文测试") == folder
    assert default_name("/tmp/上传/中文数据.jsonl") == "中文数据-clean"
    assert export_folder(workspace, "Größe-merged") == workspace.root / "exports" / "Größe-merged"
    votes_name = vote_panel.default_name(["20250101-120000-中文测试"])
    assert checked_name(votes_name, "dataset name") == "votes-20250101-120000-中文测试"
