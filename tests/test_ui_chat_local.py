"""Models on this machine as Chat columns (backend/chat/local_targets.py, ui/tabs/chat.py): the
handlers called with the values a browser sends, over real tool layouts (tests/local_model_stores.py):
an Ollama store whose blob is the offline SmolLM2 GGUF file answers through llama.cpp with the file's
own chat template, and a hub-cache snapshot of the demo model answers through transformers as a run's
base does. The lists come from the scan's cache only; nothing is written into the tools' folders."""

from __future__ import annotations

import json

import pytest

from backend.chat.catalog import local_choices, run_ids_of
from backend.chat.generation import GenerationSettings
from backend.chat.local_targets import LOCAL, local_targets
from backend.chat.targets import ChatTarget
from backend.models.local.scan import scan_into_cache
from backend.runs.workspace import Workspace
from tests.local_model_stores import CPU_64, hub_snapshot, lmstudio_folder, ollama_store, smollm2_gguf
from tests.test_chat_support import single_thread  # noqa: F401 (fixture)
from ui.chat_session import ChatSession
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.panels import local_models_panel
from ui.tabs import chat

pytestmark = pytest.mark.usefixtures("single_thread")

STATUS, HEADERS, BOTS = 15, 5, 10
TOKENS = 6
PROMPT = "What is the capital of France?"


def tree(folder):
    """Every path under `folder` with its size and modification time: what a write would change."""
    return {p: (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def stores(tmp_path_factory, demo_model_dir):
    """The tools' folders: Ollama (SmolLM2's GGUF blob), the hub cache (the demo model), LM Studio (the
    same GGUF file under another name)."""
    root = tmp_path_factory.mktemp("stores")
    gguf = smollm2_gguf(root)
    ollama = ollama_store(root / "ollama", gguf)
    hub = root / "hub"
    snapshot = hub_snapshot(hub, demo_model_dir)
    lmstudio = lmstudio_folder(root / "home" / ".lmstudio" / "models", gguf)
    return {"root": root, "gguf": gguf, "ollama": ollama, "hub": hub, "snapshot": snapshot, "lmstudio": lmstudio}


@pytest.fixture
def services(stores, tmp_path, monkeypatch):
    """Chat services over a workspace without runs whose places are the stores above."""
    monkeypatch.setenv("HOME", str(stores["root"] / "home"))
    for name in ("HF_HOME", "XDG_CACHE_HOME", "LLAMA_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OLLAMA_MODELS", str(stores["ollama"]))
    monkeypatch.setenv("HF_HUB_CACHE", str(stores["hub"]))
    workspace = Workspace(tmp_path / "ws").ensure()
    return chat.ChatServices(UIContext(workspace=workspace, texts=merge_texts(chat.TEXT), i18n=None))


def scanned(services):
    root = services.ctx.workspace.root
    return scan_into_cache(root, local_models_panel.places_of(root), CPU_64)


def blob_of(stores):
    return next((stores["ollama"] / "blobs").iterdir())


def test_before_a_scan_nothing_is_offered_and_the_page_load_starts_one(services, stores):
    assert local_targets(services.ctx.workspace.root) == {}
    _runs, picks, _device, notice, *_ = chat.refresh_choices(services, "en", [], [], "cpu", {})
    assert picks["choices"] == [] and "No runs yet" in notice
    thread = local_models_panel.ensure_scan(services.ctx.workspace.root)
    assert thread is not None
    thread.join()
    assert local_models_panel.ensure_scan(services.ctx.workspace.root) is None   # cached: no second scan
    assert len(local_targets(services.ctx.workspace.root)) == 3


def test_the_picker_lists_each_model_on_this_machine_after_a_scan(services, stores):
    before = {name: tree(stores[name]) for name in ("ollama", "hub", "lmstudio")}
    scanned(services)
    _runs, picks, _device, notice, *_ = chat.refresh_choices(services, "en", [], [], "cpu", {})
    gguf_file = stores["lmstudio"] / "HuggingFaceTB" / "SmolLM2-135M-Instruct-GGUF" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert picks["choices"] == [
        ("FineTuneStudio/demo-tiny · Hugging Face · transformers", f"{LOCAL}{stores['snapshot']}"),
        ("smollm2:135m · Ollama · GGUF, llama.cpp (CPU)", f"{LOCAL}{blob_of(stores)}"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1 · LM Studio · GGUF, llama.cpp (CPU)",
         f"{LOCAL}{gguf_file}")]
    assert "No runs yet" not in notice   # these models answer without a run
    assert run_ids_of([value for _label, value in picks["choices"]]) == []   # their votes go to no run's file
    assert local_choices(services.ctx.workspace.root)[1] == ("smollm2:135m · Ollama · GGUF, llama.cpp (CPU)",
                                                             str(blob_of(stores)))
    plan, _ = chat.plan_outputs(services, "en", [], [f"{LOCAL}{stores['snapshot']}", f"{LOCAL}{blob_of(stores)}"],
                                "cpu")
    assert "base model FineTuneStudio/demo-tiny" in plan and "smollm2:135m: GGUF file" in plan
    assert {name: tree(stores[name]) for name in ("ollama", "hub", "lmstudio")} == before


def test_a_model_gone_since_the_scan_leaves_the_list_and_a_send_says_so(services, stores, tmp_path):
    folder = tmp_path / "mine"
    gone = folder / "gone.gguf"
    folder.mkdir()
    gone.symlink_to(stores["gguf"])
    (services.ctx.workspace.root / "settings.json").write_text(json.dumps({"model_folders": [str(folder)]}))
    scanned(services)
    value = f"{LOCAL}{gone}"
    assert value in local_targets(services.ctx.workspace.root)
    gone.unlink()
    assert value not in local_targets(services.ctx.workspace.root)
    (only,) = chat.send_prompt(services, "zh", [], [value], "cpu", "hi", ChatSession(), False, "",
                               True, 0.7, 0.9, 50, 1.0, TOKENS, 0)
    assert only[STATUS].startswith("⚠️") and "已不在磁盘上" in only[STATUS] and str(gone) in only[STATUS]


def test_an_ollama_gguf_answers_with_the_files_own_template_as_llama_cpp_greedy(services, stores,
                                                                               starter_model_dir):
    """The column's text is llama.cpp's greedy answer to the prompt the file's tokenizer.chat_template
    renders (the converted SmolLM2's tokenizer holds the same template)."""
    from backend.models.loading import load_tokenizer

    scanned(services)
    value = f"{LOCAL}{blob_of(stores)}"
    outputs = list(chat.send_prompt(services, "en", [], [value], "cpu", PROMPT, ChatSession(), False, "",
                                    True, 0.7, 0.9, 50, 1.0, TOKENS, 0))
    last = outputs[-1]
    assert last[STATUS].startswith("**Done.**"), last[STATUS]
    assert last[HEADERS] == "**smollm2:135m** · Ollama · GGUF, llama.cpp (CPU)"
    text = last[BOTS][-1]["content"]
    engine = services.engine.get()
    try:
        tokenizer = load_tokenizer(starter_model_dir)
        messages = [{"role": "user", "content": PROMPT}]
        prompt = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                    return_dict=False))
        loaded = engine._gguf[str(blob_of(stores))]
        assert loaded.tokenizer.apply_chat_template(messages) == prompt
        answer = loaded.model.greedy(prompt, TOKENS)
        assert text == tokenizer.decode(answer, skip_special_tokens=True) and text.strip()
    finally:
        engine.unload()


def test_a_hub_cache_folder_answers_as_the_same_model_as_a_runs_base(services, stores, demo_model_dir):
    scanned(services)
    value = f"{LOCAL}{stores['snapshot']}"
    outputs = list(chat.send_prompt(services, "en", [], [value], "cpu", PROMPT, ChatSession(), False, "",
                                    True, 0.7, 0.9, 50, 1.0, TOKENS, 0))
    last = outputs[-1]
    assert last[STATUS].startswith("**Done.**"), last[STATUS]
    assert last[HEADERS] == "**FineTuneStudio/demo-tiny** · Hugging Face · transformers"
    engine = services.engine.get()
    try:
        base = engine.answer(ChatTarget(model=str(demo_model_dir)), PROMPT,
                             GenerationSettings(max_new_tokens=TOKENS))
        assert last[BOTS][-1]["content"] == base.text and base.new_tokens > 0
    finally:
        engine.unload()
