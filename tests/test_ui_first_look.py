"""What a new user meets in the first minutes: the Data tab before any file,
optional numbers shown empty, trust_remote_code decided per model and never
remembered, wandb chosen without wandb installed, and a LLaMA-Factory folder
with several datasets."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys

import pytest

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.config_recipes import tiny_config
from backend.data.resolve import DatasetUnreadable, check_dataset, load_rows
from backend.runs.store import RunError, RunStore
from ui import forms
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.settings import load_settings, save_settings
from ui.tabs import runs, train


@pytest.fixture(scope="module")
def page(tmp_path_factory, demo_model_dir):
    """The whole UI built for a fresh workspace, as app.py builds it (not launched)."""
    from backend.runs.workspace import Workspace
    from ui.shell import build_app

    ws = Workspace(tmp_path_factory.mktemp("first") / "ws").ensure()
    save_settings(ws, train=tiny_config(trust_remote_code=True, eval_steps=None).to_dict())  # an old settings file
    blocks = build_app(ws)
    return {getattr(b, "elem_id", None): b for b in blocks.blocks.values() if getattr(b, "elem_id", None)}


def _shown(block) -> bool:
    while block is not None:
        if getattr(block, "visible", True) is False:
            return False
        block = getattr(block, "parent", None)
    return True


def test_fresh_data_tab_says_what_to_do_instead_of_an_empty_table(page):
    assert _shown(page["data-empty"]) and '"key": "data.empty"' in str(page["data-empty"].value)
    assert not _shown(page["data-summary"]) and not _shown(page["data-histogram"])


def test_optional_numbers_are_shown_empty(page):
    for name in ("eval_steps", "num_processes", "save_total_limit", "early_stopping_patience", "neftune_noise_alpha"):
        config = tiny_config(save_total_limit=None)
        assert dict(zip(forms.NAMES, forms.form_values(config)))[name] == ""
        assert "0 = empty" not in forms.help_text(name)
    assert page["train-eval-steps"].value == "" and page["train-num-processes"].value == ""
    values = dict(zip(forms.NAMES, forms.form_values(tiny_config())))
    values.update(eval_steps=" 7 ", num_processes="0", neftune_noise_alpha="5")
    config = forms.config_from_values(list(values.values()), "demo", "demo")
    assert (config.eval_steps, config.num_processes, config.neftune_noise_alpha) == (7, None, 5.0)
    values.update(eval_steps="often")
    with pytest.raises(ConfigError, match="eval_steps = 'often' should be int"):
        forms.config_from_values(list(values.values()), "demo", "demo")


def test_trust_remote_code_is_never_remembered(page, workspace):
    assert page["train-trust-remote-code"].value is False  # the old settings file had it on
    save_settings(workspace, train=tiny_config(trust_remote_code=True, lora_r=4).to_dict())
    saved = load_settings(workspace)["train"]
    assert "trust_remote_code" not in saved and saved["lora_r"] == 4
    assert "trust_remote_code" not in json.loads(workspace.settings_file.read_text(encoding="utf-8"))["train"]


@pytest.mark.skipif(importlib.util.find_spec("wandb") is not None, reason="wandb is installed here")
def test_wandb_without_the_package_says_how_to_install_it(workspace, subprocess_env, tmp_path):
    config = tiny_config(report_to="wandb", max_steps=1)
    with pytest.raises(ConfigError, match="pip install wandb"):
        config.check_packages()
    ctx = UIContext(workspace=workspace, texts=merge_texts(train.TEXT, runs.TEXT), i18n=None)
    values = forms.form_values(config)
    derived, _ = train.plan(ctx, "en", "demo", "demo", {"rows": 10}, [], *values)
    assert "pip install wandb" in derived
    with pytest.raises(RunError, match="pip install wandb"):
        RunStore(workspace).launch(config)
    (tmp_path / "run.yaml").write_text(config.to_yaml(), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "backend.train", "--config", str(tmp_path / "run.yaml"),
                           "--workspace", str(workspace.root)], capture_output=True, text=True, env=subprocess_env,
                          timeout=120)
    assert proc.returncode == 2 and "pip install wandb" in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr


def _llama_factory_folder(root):
    root.mkdir()
    (root / "greet.json").write_text(json.dumps([{"instruction": "Say hi", "input": "", "output": "Hi"}] * 4),
                                     encoding="utf-8")
    (root / "chat.jsonl").write_text("".join(json.dumps({"conversations": [
        {"from": "human", "value": f"q{i}"}, {"from": "gpt", "value": f"a{i}"}]}) + "\n" for i in range(6)),
        encoding="utf-8")
    (root / "dataset_info.json").write_text(json.dumps({
        "greet": {"file_name": "greet.json"},
        "chat": {"file_name": "chat.jsonl", "formatting": "sharegpt"}}), encoding="utf-8")
    return root


def test_a_llama_factory_folder_with_several_datasets_trains_the_named_one(workspace, tmp_path):
    folder = _llama_factory_folder(tmp_path / "lf")
    with pytest.raises(DatasetUnreadable, match="dataset_name"):
        check_dataset(str(folder), workspace)
    config = RunConfig.from_yaml(f"dataset: {folder}\ndataset_name: chat\n")
    check_dataset(config.dataset, workspace, config.dataset_name)
    rows, eval_rows = load_rows(folder, dataset_name=config.dataset_name)
    assert len(rows) == 6 and eval_rows is None
    assert rows[0]["messages"] == [{"role": "user", "content": "q0"}, {"role": "assistant", "content": "a0"}]
    assert train.count_rows(UIContext(workspace, {}, None), str(folder), "greet")["rows"] == 4
    with pytest.raises(ConfigError, match="only applies to a LLaMA-Factory data folder"):
        check_dataset("demo", workspace, "chat")


def test_the_worker_trains_on_the_named_dataset(workspace, tmp_path):
    """The worker's own data loading (build_datasets) with the demo tokenizer."""
    from backend.models.loading import load_tokenizer
    from backend.training.dataset import build_datasets

    folder = _llama_factory_folder(tmp_path / "lf")
    config = tiny_config(dataset=str(folder), dataset_name="chat", val_size=0.0)
    train_data, eval_data, counts = build_datasets(load_tokenizer(workspace.models_dir / "demo"), config, workspace)
    assert counts.total == 6 and len(train_data) == 6 and eval_data is None


def test_the_train_tab_shows_every_form_field_with_its_bounds(page):
    """The page as built: each field of each metadata section has its widget, and a number's
    widget has the limits RunConfig.validate checks (tests/test_config_policy.py checks the ends)."""
    bounds = {f.name: f.metadata.get("bounds") for f in dataclasses.fields(RunConfig)}
    for spec in forms.ALL_FIELDS:
        widget = page[f"train-{spec.name.replace('_', '-')}"]
        if spec.widget in ("number", "slider"):
            assert (widget.minimum, widget.maximum) == (bounds[spec.name].low, bounds[spec.name].high), spec.name
