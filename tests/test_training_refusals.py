"""Runs refused before training, in this process: the worker's own checks (backend.training.cli.prepare_job) and
its one line on stderr (errors.fail), as `python -m backend.train` takes them. Every refusal here happens
before a model loads and before torch is imported in a worker; test_training_worker.py keeps one real
subprocess case for the exit code and the clean stderr."""

from __future__ import annotations

import shutil

import pytest

from backend.config_recipes import tiny_config
from backend.training.cli import parse_args, prepare_job
from backend.training.errors import EXIT_CONFIG, fail

CASES = [
    ("lora_alpa=8", "did you mean 'lora_alpha'"),
    ("model_name_or_path=/no/such/model", "/no/such/model does not exist"),
    ("dataset=/no/such/data.jsonl", "/no/such/data.jsonl"),
    ("dataset=UNREADABLE", "no known shape: its columns are question"),
    ("loss_function=no_such_module:fn", "Cannot import module 'no_such_module'"),
    ("callbacks=[os:system]", "callbacks: 'os:system' is the function system, not a TrainerCallback"),
    ("callbacks=[collections:OrderedDict]", "callbacks: 'collections:OrderedDict' is the class OrderedDict"),
    ("loss_function=os:sep", "loss_function: 'os:sep' is a str value, not a function"),
    ("learning_rate=.nan", "learning_rate = nan is not a finite number"),
    ("devices=7", "no such GPU cuda:7"),
    ("model_name_or_path=NOCONFIG", "config.json is missing or unreadable"),
    ("use_liger_kernel=true", "use_liger_kernel needs a CUDA GPU"),
]


def refuse(workspace, setting: str, capsys) -> tuple[int, list[str]]:
    """The worker's path up to its checks, for `--config run.yaml --set SETTING`: (exit code, stderr lines)."""
    config = workspace.root / "run.yaml"
    tiny_config().save(config)
    run_dir = workspace.runs_dir / "bad"
    args = parse_args(["--workspace", str(workspace.root), "--config", str(config), "--run-dir", str(run_dir),
                       "--set", setting])
    with pytest.raises(Exception) as refused:
        prepare_job(args)
    code = fail(None, refused.value, run_dir)
    assert not run_dir.exists(), "a refused run leaves no run folder"
    return code, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("setting, words", CASES)
def test_a_bad_setting_or_path_is_refused_in_one_sentence_before_training(workspace, capsys, setting, words):
    if "UNREADABLE" in setting:  # a file the data backend refuses: its sentence, exit 2
        unreadable = workspace.root / "questions.jsonl"
        unreadable.write_text('{"question": "x"}\n')
        setting = setting.replace("UNREADABLE", str(unreadable))
    if "NOCONFIG" in setting:  # a folder with a tokenizer but no config.json
        folder = workspace.root / "no-config"
        shutil.copytree(workspace.models_dir / "demo", folder)
        (folder / "config.json").unlink()
        setting = setting.replace("NOCONFIG", str(folder))
    code, lines = refuse(workspace, setting, capsys)
    said = [line for line in lines if line.startswith("error:")]
    assert code == EXIT_CONFIG and len(said) == 1 and words in said[0], lines
    assert "Traceback" not in "\n".join(lines)


REFUSING_COMMANDS = [  # (module, arguments, what the sentence names)
    ("backend.train", ["--recipe", "demo-tiny", "--workspace", "{ws}", "--set", "model_name_or_path=/no/such/model"],
     "/no/such/model"),
    ("backend.train", ["--recipe", "demo-tiny", "--workspace", "{ws}", "--set", "dataset=/no/such/data.jsonl"],
     "/no/such/data.jsonl"),
    ("backend.train", ["--recipe", "demo-tiny", "--workspace", "{ws}", "--set", "devices=7"], "cuda:7"),
    ("backend.train", ["--recipe", "demo-tiny", "--workspace", "{ws}", "--set", "use_liger_kernel=true"],
     "use_liger_kernel"),
    ("backend.data", ["check", "/no/such.json"], "/no/such.json"),
    ("backend.evaluate", ["--run", "/no/such/run"], "/no/such/run"),
    ("backend.export", ["--checkpoint", "/no/such/final", "--out", "x", "--merge"], "/no/such/final"),
    ("backend.serve", ["--run", "/no/such/run"], "/no/such/run"),
]
NO_TORCH = """import runpy, sys
sys.argv = [sys.argv[1], *sys.argv[2:]]
try:
    runpy.run_module(sys.argv[0], run_name="__main__")
except SystemExit as end:
    print("EXIT", end.code, "TORCH", "torch" in sys.modules, file=sys.stderr)
"""


@pytest.mark.parametrize("module, args, named", REFUSING_COMMANDS, ids=[f"{m} {a[-1]}" for m, a, _ in REFUSING_COMMANDS])
def test_a_refusal_on_the_command_line_never_imports_torch(workspace, subprocess_env, module, args, named):
    """The refusals above, as real command lines: exit 2, one sentence, and torch never imported (it costs
    seconds of CPU: docs/BENCHMARKS.md, "Refusals")."""
    import subprocess
    import sys

    argv = [a.replace("{ws}", str(workspace.root)) for a in args]
    result = subprocess.run([sys.executable, "-c", NO_TORCH, module, *argv], cwd=workspace.root, env=subprocess_env,
                            capture_output=True, text=True, timeout=300)
    assert "EXIT 2 TORCH False" in result.stderr, result.stderr[-2000:]
    assert named in result.stderr and "Traceback" not in result.stderr
