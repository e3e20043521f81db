"""The Runs tab's Diagnostics accordion without a browser: the handler writes the real zip under
workspace/diagnostics/, shows its manifest as a table in English and Chinese, and refuses a bad run id."""

from __future__ import annotations

import json
import zipfile

import pytest

from backend.runs.workspace import Workspace
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.panels import diagnostics_panel
from ui.tabs import runs

RUN = "20250101-120000-diag"
TOKEN = "hf_UiDiagnosticsToken0123456789"


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs"))  # no nvidia-smi: the test stays in process
    ws = Workspace(tmp_path / "workspace").ensure()
    run = ws.runs_dir / RUN
    run.mkdir()
    (run / "config.yaml").write_text("model_name_or_path: demo\n")
    (run / "status.json").write_text(json.dumps({"state": "failed", "error": f"401 for {TOKEN}"}))
    (run / "train.log").write_text("".join(f"step {i}\n" for i in range(520)) + f"HF_TOKEN={TOKEN}\n")
    return UIContext(workspace=ws, texts=merge_texts(runs.TEXT), i18n=None)


def test_make_zip_in_english(ctx):
    shown, path = diagnostics_panel.make_zip(ctx, "en", RUN)
    assert path and path.startswith(str(ctx.workspace.root / "diagnostics" / f"{RUN}-")) and path.endswith(".zip")
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        assert all(TOKEN.encode() not in archive.read(n) for n in names)
    assert {"config.yaml", "status.json", "train.log", "manifest.json", "versions.json"} <= names
    assert "| file | size | holds | removed |" in shown
    assert "| `train.log` |" in shown and "the last 500 lines of the worker's log" in shown
    assert "secret variable ×" in shown and "`HF_TOKEN`" in shown
    assert "Not in the run folder (listed in manifest.json): `summary.json`, `metrics.jsonl`." in shown
    assert TOKEN not in shown
    # A second click within the same second gets a name of its own.
    assert diagnostics_panel.make_zip(ctx, "en", RUN)[1] != path


def test_make_zip_in_chinese_and_every_member_has_a_text(ctx):
    shown, path = diagnostics_panel.make_zip(ctx, "zh", RUN)
    assert path and "| 文件 | 大小 | 内容 | 已移除 |" in shown and "训练进程日志的最后 500 行" in shown
    assert "机密环境变量 ×" in shown and "运行文件夹中没有" in shown
    for name in zipfile.ZipFile(path).namelist():
        if name != "manifest.json":  # each member is described in both languages, not by the backend's English
            assert f"runs.diag.holds.{name}" in ctx.texts, name
    for key, text in diagnostics_panel.TEXT.items():
        assert text["en"] and text["zh"], key


@pytest.mark.parametrize("lang, words", [("en", "No run named '../../etc'"), ("zh", "没有名为 '../../etc' 的运行")])
def test_a_bad_run_id_is_refused_in_both_languages(ctx, lang, words):
    shown, path = diagnostics_panel.make_zip(ctx, lang, "../../etc")
    assert path is None and words in shown
    assert not any((ctx.workspace.root / "diagnostics").glob("*.zip"))
    assert diagnostics_panel.make_zip(ctx, lang, None) == (ctx.msg(lang, "runs.diag.pick"), None)
