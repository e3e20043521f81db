"""Serving a model on this machine (ui/panels/serve_panel.py → backend/serve/server_job.start_local →
`python -m backend.serve --gguf FILE | --folder DIR --name NAME`): the panel lists the scan's cached
models, a name made safe from the one the scan gives, the refusals in a sentence, a hub-cache folder
answering in-process as the demo model does, and one real server for an Ollama blob asked over HTTP."""

from __future__ import annotations

import httpx
import pytest

from backend.chat.engine import ChatEngine
from backend.chat.generation import GenerationSettings
from backend.chat.targets import ChatTarget
from backend.models.local.places import all_places, saved_folders
from backend.models.local.scan import scan_into_cache
from backend.runs.workspace import Workspace
from backend.serve.cli import Refused, check_args, parse_args, served_models
from backend.serve.names import served_name
from backend.serve.protocol import ApiError
from tests.browser.harness import free_port
from tests.local_model_stores import CPU_64, hub_snapshot, ollama_store, smollm2_gguf
from tests.polling import wait_for
from ui.panels import serve_panel


@pytest.fixture
def local_workspace(tmp_path, monkeypatch, demo_model_dir):
    """A workspace without runs whose scan found SmolLM2's GGUF in Ollama and the demo model in the hub cache."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("HF_HOME", "XDG_CACHE_HOME", "LLAMA_CACHE"):
        monkeypatch.delenv(name, raising=False)
    store = ollama_store(tmp_path / "ollama", smollm2_gguf(tmp_path))
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    snapshot = hub_snapshot(tmp_path / "hub", demo_model_dir)
    workspace = Workspace(tmp_path / "ws").ensure()
    scan_into_cache(workspace.root, all_places(saved_folders(workspace.root)), CPU_64)
    return workspace, next((store / "blobs").iterdir()), snapshot


@pytest.mark.parametrize(("found", "served"), [
    ("smollm2:135m", "smollm2-135m"), ("FineTuneStudio/demo-tiny", "FineTuneStudio-demo-tiny"),
    ("hf.co/Org/Model-GGUF:Q4_K_M", "hf.co-Org-Model-GGUF-Q4_K_M"), ("'; rm -rf ~ #", "rm--rf"),
    ("../../etc/passwd", "etc-passwd"), ("中文模型:latest", "中文模型-latest"), ("", "local-model"), ("::", "local-model"),
])
def test_a_served_name_is_made_safe_from_the_name_found_on_disk(found, served):
    assert served_name(found) == served


def test_the_panel_lists_the_cached_models_after_none(local_workspace):
    workspace, blob, snapshot = local_workspace
    update = serve_panel.local_list(workspace, "zh", str(blob))
    assert update["choices"] == [("—— 无：为训练运行提供服务 ——", ""),
                                 ("FineTuneStudio/demo-tiny · Hugging Face · transformers", str(snapshot)),
                                 ("smollm2:135m · Ollama · GGUF, llama.cpp (CPU)", str(blob))]
    assert update["value"] == str(blob)
    assert serve_panel.local_list(workspace, "en", "/gone")["value"] == ""


def test_refusals_name_what_is_wrong(local_workspace, tmp_path):
    workspace, _blob, _ = local_workspace
    assert "Pick a run" in serve_panel.start_server(workspace, "en", None, 8000, "cpu", "")
    refused = serve_panel.start_server(workspace, "zh", None, 8000, "cpu", "/etc/passwd")
    assert refused.startswith("⚠️ 无法启动：") and "not a model the scan of this machine found" in refused
    for argv, said in [
        (["--run", str(tmp_path), "--name", "x"], "--name names the one model of --gguf or --folder"),
        (["--folder", str(tmp_path), "--name", "a b'"], "is not a plain model name"),
        (["--folder", str(tmp_path)], "has no config.json"),
        (["--folder", str(tmp_path), "--engine", "vllm"], "--engine does not apply to --folder"),
    ]:
        with pytest.raises(Refused, match=said):
            check_args(parse_args(argv))


def test_a_hub_cache_folder_is_served_under_its_name_as_the_demo_model_answers(local_workspace, demo_model_dir):
    _, _, snapshot = local_workspace
    args = parse_args(["--folder", str(snapshot), "--name", served_name("FineTuneStudio/demo-tiny")])
    check_args(args)
    served = served_models(args)
    assert served.names() == ["FineTuneStudio-demo-tiny"]
    with pytest.raises(ApiError, match="Use one of: FineTuneStudio-demo-tiny"):
        served.get("base")
    engine, settings = ChatEngine(), GenerationSettings(max_new_tokens=6)
    try:
        reply = engine.answer(served.get("FineTuneStudio-demo-tiny"), "Hello!", settings)
        assert reply.new_tokens > 0 and reply.text == engine.answer(ChatTarget(model=str(demo_model_dir)), "Hello!",
                                                                    settings).text
    finally:
        engine.unload()


@pytest.mark.usefixtures("starts_processes")
def test_the_panel_serves_an_ollama_gguf_under_its_safe_name(local_workspace):
    from backend.serve.server_job import status

    workspace, blob, _ = local_workspace
    port = free_port()
    started = serve_panel.start_server(workspace, "en", None, port, "cuda:0", str(blob))
    assert "starting in the background" in started, started
    try:
        line, url, curl, _python = wait_for(
            lambda: v if (v := serve_panel.view(workspace, "en"))[1] or status(workspace).get("state") == "failed"
            else None,
            "the local model's server to serve or fail")
        assert url, line
        assert line.startswith("Serving **smollm2:135m** (a model on this machine)") and "smollm2-135m" in line
        assert '"model": "smollm2-135m"' in curl and status(workspace)["device"] == "cpu"   # llama.cpp: the CPU
        answer = httpx.post(f"{url}/chat/completions", timeout=120, json={
            "model": "smollm2-135m", "temperature": 0, "max_tokens": 4,
            "messages": [{"role": "user", "content": "What is the capital of France?"}]})
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == "smollm2-135m" and answer.json()["usage"]["completion_tokens"] > 0
    finally:
        assert serve_panel.stop_server(workspace, "en") == "The server is stopped."
