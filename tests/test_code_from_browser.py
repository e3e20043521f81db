"""What runs code on this machine is the local user's (docs/CONTRACTS.md, "Security defaults").

An app open to other computers (--allow-remote, --share) without --allow-remote-code refuses, with
a sentence and before anything is imported, queued or probed, the settings that name code (RunConfig's
`runs_code` fields) and benchmark task files. The Plan's check of the user's reward functions runs
in a child process, so their module never runs in the app. A sweep varies exactly the Train form's
settings that run no code. The handlers are called as a browser calls them; the user's module is a
real file whose import leaves a mark, so "never imported" is seen, not assumed."""

from __future__ import annotations

import sys

import pytest

from backend.config import RunConfig
from backend.config_policy import code_fields, code_settings
from backend.config_recipes import tiny_config
from backend.evaluation.benchmark_specs import refuse_task_files
from backend.sweeps.grid import FIELDS, SweepError, parse_sweep
from ui import forms
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.panels import benchmark_panel, estimate_panel, sweep_panel
from ui.tabs import evaluate, runs, train

NO_SWEEP = ["", "", "", "", "", "", "eval_loss", "auto", 16, 0, 0]  # the sweep section left empty


def _ctx(workspace, accepts_code: bool) -> UIContext:
    return UIContext(workspace=workspace, texts=merge_texts(train.TEXT, runs.TEXT, evaluate.TEXT), i18n=None,
                     accepts_code=accepts_code)


def _marking_module(folder, monkeypatch) -> tuple[str, object]:
    """A reward module on PYTHONPATH (where the worker and the Plan's child find it) whose import
    writes a mark; (its module:function, the mark's path)."""
    mark = folder / "imported.txt"
    (folder / "marking_rewards.py").write_text(
        f"open({str(mark)!r}, 'a').write('imported')\n"
        "def score(prompts, completions, **kwargs):\n    return [1.0] * len(completions)\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(folder))
    return "marking_rewards:score", mark


def _grpo_values(**settings) -> list:
    config = tiny_config(stage="grpo", per_device_train_batch_size=4, num_generations=4, val_size=0.0,
                         rewards=[{"kind": "format", "weight": 1.0}], **settings)
    return forms.form_values(config)


def _plan(ctx, values) -> str:
    rows = {"rows": 8, "has_eval": False, "prompts": [[None, True]] * 8, "context": None}
    return train.plan(ctx, "en", "demo", "demo", rows, None, *values)[0]


def test_the_fields_that_name_code_are_the_four_and_a_config_says_which_it_sets():
    assert code_fields(RunConfig) == ["trust_remote_code", "reward_functions", "callbacks", "loss_function"]
    assert code_settings(tiny_config()) == []
    assert code_settings(tiny_config(trust_remote_code=True, callbacks=["a.b:C"])) == ["trust_remote_code", "callbacks"]


def test_a_remote_app_refuses_a_reward_function_with_a_sentence_and_never_imports_it(workspace, tmp_path,
                                                                                    monkeypatch):
    ref, mark = _marking_module(tmp_path, monkeypatch)
    remote = _ctx(workspace, accepts_code=False)
    for handler in (_plan, lambda ctx, values: train.start(ctx, "en", "demo", "demo", *values)[0],
                    lambda ctx, values: sweep_panel.check(ctx, "en", "demo", "demo", *NO_SWEEP, *values),
                    lambda ctx, values: next(estimate_panel.measure(ctx, "en", "demo", "demo", None, *values))[0]):
        for refs in ([ref], ["this:x"]):
            said = handler(remote, _grpo_values(reward_functions=refs))
            assert "reward_functions would run code on this machine" in said and "--allow-remote-code" in said, said
    zh = train.plan(remote, "zh", "demo", "demo", {}, None, *_grpo_values(reward_functions=[ref]))[0]
    assert "reward_functions 会在本机运行代码" in zh
    assert not mark.exists() and "marking_rewards" not in sys.modules and "this" not in sys.modules
    assert not [p for p in workspace.runs_dir.iterdir() if p.is_dir()]  # nothing was queued

    ticked = forms.form_values(tiny_config(trust_remote_code=True))
    assert "trust_remote_code would run code on this machine" in train.start(remote, "en", "demo", "demo", *ticked)[0]
    assert not [p for p in workspace.runs_dir.iterdir() if p.is_dir()]


def test_the_local_apps_plan_checks_a_reward_function_in_a_child_process(workspace, tmp_path, monkeypatch,
                                                                        starts_processes):
    ref, mark = _marking_module(tmp_path, monkeypatch)
    local = _ctx(workspace, accepts_code=True)
    assert "✅ Your reward functions import and score a sample completion: `marking_rewards:score`" in \
        _plan(local, _grpo_values(reward_functions=[ref]))
    assert mark.read_text() == "imported" and "marking_rewards" not in sys.modules  # imported there, not here


def test_a_reward_module_that_exits_at_import_is_a_sentence_in_the_plan(workspace, starts_processes):
    # unittest.__main__ runs unittest's main at import, which ends in SystemExit: in the app it ended the Plan.
    plan = _plan(_ctx(workspace, accepts_code=True), _grpo_values(reward_functions=["unittest.__main__:x"]))
    assert "❌ Cannot import module 'unittest.__main__' for 'unittest.__main__:x': SystemExit" in plan
    assert "unittest.__main__" not in sys.modules


def test_a_remote_app_refuses_benchmark_task_files_before_reading_them(workspace, tmp_path):
    task = tmp_path / "mine.yaml"
    task.write_text("task: mine\nprocess_docs: !function utils.process_docs\n", encoding="utf-8")
    remote, local = _ctx(workspace, accepts_code=False), _ctx(workspace, accepts_code=True)
    args = ("en", "some-run", ["final"], [], str(task), 0, True)
    said = benchmark_panel.start(remote, *args)
    assert f"{task} is a task file: lm-eval imports the Python its !function tags name" in said
    assert "studio_facts_choice" in said  # what may run instead
    assert "is a task file" not in benchmark_panel.start(local, *args)  # the local user's own file is read
    refuse_task_files(["studio_facts_choice hellaswag"])  # the project's tasks and lm-eval's own by name


@pytest.mark.parametrize("argv, accepts", [
    ([], True),
    (["--host", "0.0.0.0", "--allow-remote", "--auth", "a:b"], False),
    (["--allow-remote", "studio.lan"], False),
    (["--share"], False),
    (["--host", "0.0.0.0", "--allow-remote", "--auth", "a:b", "--allow-remote-code"], True),
])
def test_the_app_takes_code_from_a_browser_only_on_this_machine_or_with_the_flag(argv, accepts):
    import app

    assert app.accepts_code(app.parse_args(argv)) is accepts


def test_a_sweep_varies_exactly_the_train_forms_settings_that_run_no_code():
    joined = {name for name, shown in forms.JOINED.items() if shown in forms.FIELD_NAMES}
    offered = {*[n for n in forms.FIELD_NAMES if n not in forms.JOINED.values()], *joined,
               "model_name_or_path", "dataset"}  # the form's widgets and the tab's two pickers
    assert set(FIELDS) == offered - set(code_fields(RunConfig))
    for name in ("callbacks", "loss_function", "reward_functions", "trust_remote_code"):
        assert name not in FIELDS
        with pytest.raises(SweepError, match=f"The sweep varies '{name}', which a sweep leaves to its base"):
            parse_sweep({"grid": {name: ["a.b:c"]}})
