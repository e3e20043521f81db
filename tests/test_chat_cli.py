"""python -m backend.chat as a real subprocess, and its bad-input paths."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from backend.chat.cli import main
from backend.models.demo_facts import DEMO_PROMPTS
from tests.test_chat_support import chat_lora_run, single_thread  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def cli_run(chat_lora_run):  # noqa: F811 (the imported fixture)
    return chat_lora_run, [chat_lora_run / f"checkpoint-{step}" for step in (10, 20, 30)]


def test_cli_prints_each_answer_labelled(demo_model_dir, cli_run, subprocess_env):
    from backend.chat.engine import ChatEngine
    from backend.chat.generation import GenerationSettings
    from backend.chat.targets import ChatTarget, target_for_folder

    _, (first, second, _incomplete) = cli_run
    prompt = DEMO_PROMPTS[0][0]
    command = [sys.executable, "-m", "backend.chat", "--model", str(demo_model_dir), "--checkpoint", str(first),
               "--checkpoint", str(second), "--prompt", prompt, "--greedy", "--max-new-tokens", "16", "--device", "cpu"]
    done = subprocess.run(command, env=subprocess_env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    blocks = done.stdout.split("=== ")[1:]
    assert [b.split(" (")[0] for b in blocks] == ["base", "run-a · checkpoint-10", "run-a · checkpoint-20"]
    # Each block's answer is what the engine gives in this process.
    engine, settings = ChatEngine(), GenerationSettings(greedy=True, max_new_tokens=16)
    targets = [ChatTarget(model=str(demo_model_dir))] + [target_for_folder(str(demo_model_dir), f) for f in (first, second)]
    for block, target in zip(blocks, targets):
        answer = block.split("===\n", 1)[1].rsplit("\n[", 1)[0]
        assert answer == engine.answer(target, prompt, settings).text


def test_cli_refuses_an_incomplete_checkpoint(demo_model_dir, cli_run, capsys):
    _, (_, _, incomplete) = cli_run
    code = main(["--model", str(demo_model_dir), "--checkpoint", str(incomplete), "--prompt", "hi"])
    assert code == 2
    assert "COMPLETE marker" in capsys.readouterr().err


@pytest.mark.parametrize("argv, expected", [
    (["--model", "/no/such/model", "--prompt", "hi"], "does not exist"),
    (["--model", "MODEL", "--checkpoint", "/no/such/ckpt", "--prompt", "hi"], "does not exist"),
    (["--model", "MODEL", "--prompt", "hi", "--max-new-tokens", "0"], "Max new tokens"),
    (["--model", "MODEL", "--prompt", "hi", "--device", "gpu"], "not a device"),
])
def test_cli_bad_input_is_one_clear_line(demo_model_dir, capsys, argv, expected):
    argv = [str(demo_model_dir) if a == "MODEL" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_cli_model_without_chat_template_answers_through_a_known_one(demo_model_dir, tmp_path, capsys):
    import shutil

    folder = tmp_path / "no-template"
    shutil.copytree(demo_model_dir, folder)
    config = folder / "tokenizer_config.json"
    data = json.loads(config.read_text())
    data.pop("chat_template", None)
    config.write_text(json.dumps(data))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    # Its tokenizer holds ChatML's tokens: chat_template auto gives it ChatML (backend/models/chat_templates.py).
    assert main(["--model", str(folder), "--prompt", "hi", "--max-new-tokens", "2", "--greedy"]) == 0
    assert "Traceback" not in capsys.readouterr().err
