"""Chat templates on the real offline models: the template a run
trains with (backend/models/chat_templates.py), the EOS it stops on, the model
check, the data preview, and a base model (gemma-3-270m) trained through the
real worker whose checkpoint stops. The real-model tests are budgeted: one
tokenizer load per model and test, one 12-step LoRA run (about 25 s)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import GenerationConfig

from backend.data.encode import IGNORE_INDEX, count_tokens, encode_messages
from backend.models.chat_templates import (
    KNOWN,
    TemplateError,
    apply_for_model,
    apply_template,
    stop_token_ids,
)
from backend.models.loading import inspect_model_folder, load_tokenizer

REPO = Path(__file__).resolve().parents[1]
MULTI = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "你好"},
    {"role": "assistant", "content": "你好！有什么可以帮你？"},
]
ROWS = [[{"role": "user", "content": q}, {"role": "assistant", "content": a}] for q, a in (
    ("What is the capital of France?", "Paris."), ("What colour is milk?", "White."),
    ("How many legs does a cat have?", "Four."), ("What is 2 plus 2?", "4."))]


def _same_as_the_template(tokenizer, messages, marks: bool) -> None:
    """Our encoding (the worker's) against apply_chat_template: same ids, same count, and where the
    template marks assistant tokens with {% generation %}, the same trained tokens."""
    encoded = encode_messages(tokenizer, messages, cutoff_len=0)
    reference = tokenizer.apply_chat_template(messages, return_dict=True, return_assistant_tokens_mask=marks)
    assert encoded.input_ids == reference["input_ids"]
    assert count_tokens(tokenizer, [{"messages": messages}]) == [len(reference["input_ids"])]
    if marks:
        assert [label != IGNORE_INDEX for label in encoded.labels] == [bool(m) for m in reference["assistant_masks"]]
        assert any(reference["assistant_masks"])


def test_real_tokenizers_encode_and_mask_as_their_templates(starter_model_dir, gemma_model_dir):
    gemma = load_tokenizer(gemma_model_dir)
    plan = apply_for_model(gemma, "auto", gemma_model_dir)
    assert (plan.name, plan.reason, plan.eos_token, plan.eos_id) == ("gemma", "architecture", "<end_of_turn>", 106)
    assert gemma.eos_token_id == 106 and not plan.added_tokens
    for messages in (MULTI, MULTI[1:3]):
        _same_as_the_template(gemma, messages, marks=True)
    text = gemma.apply_chat_template(MULTI[:3], tokenize=False)
    assert text == ("<bos><start_of_turn>user\nBe brief.\n\nWhat is the capital of France?<end_of_turn>\n"
                    "<start_of_turn>model\nParis.<end_of_turn>\n")

    smol = load_tokenizer(starter_model_dir)
    own = apply_for_model(smol, "auto", starter_model_dir)  # SmolLM2's own template (no {% generation %})
    assert (own.name, own.eos_token, own.eos_id) == ("own", "<|im_end|>", 2)
    _same_as_the_template(smol, MULTI, marks=False)
    encoded = encode_messages(smol, MULTI, 0)
    trained = smol.decode([t for t, label in zip(encoded.input_ids, encoded.labels) if label != IGNORE_INDEX])
    assert trained == "Paris.<|im_end|>你好！有什么可以帮你？<|im_end|>"
    chatml = apply_template(smol, "chatml", "llama")  # its tokens are in SmolLM2's vocabulary: nothing added
    assert (chatml.name, chatml.reason, chatml.added_tokens) == ("chatml", "asked", [])
    _same_as_the_template(smol, MULTI, marks=True)


def test_a_choice_that_does_not_fit_is_one_sentence_and_chatml_adds_its_tokens(gemma_model_dir, demo_model_dir):
    gemma = load_tokenizer(gemma_model_dir)
    with pytest.raises(TemplateError, match=r"chat_template = llama3 does not fit .* lacks <\|start_header_id\|>"):
        apply_for_model(gemma, "llama3", gemma_model_dir)
    with pytest.raises(TemplateError, match="has no chat template: choose auto"):
        apply_for_model(gemma, "own", gemma_model_dir)
    before = len(gemma)
    plan = apply_for_model(gemma, "chatml", gemma_model_dir)
    assert plan.added_tokens == ["<|im_start|>", "<|im_end|>"] and plan.added_token_ids == [before, before + 1]
    assert plan.vocabulary_size == before + 2 and gemma.eos_token == "<|im_end|>"
    assert "added to the vocabulary" in str(plan.describe())
    _same_as_the_template(gemma, MULTI, marks=True)
    demo = load_tokenizer(demo_model_dir)
    assert apply_for_model(demo, "auto", demo_model_dir).name == "own"
    assert {k.name for k in KNOWN.values()} == {"gemma", "llama3", "chatml"}


def test_generation_stops_on_the_union_of_tokenizer_and_generation_config(demo_model_dir):
    from backend.chat.generation import GenerationSettings, _eos_ids, generation_config_for
    from backend.models.loading import load_model

    tokenizer = load_tokenizer(demo_model_dir)  # eos <|im_end|> = 2
    assert stop_token_ids(tokenizer, GenerationConfig(eos_token_id=0)) == [0, 2]
    assert stop_token_ids(tokenizer, GenerationConfig(eos_token_id=[2, 5])) == [2, 5]
    assert stop_token_ids(tokenizer, None) == [2]
    model = load_model(demo_model_dir)
    model.generation_config.eos_token_id = 0  # a wrong id, as in a copied folder
    config = generation_config_for(model, tokenizer, GenerationSettings(greedy=True), 8)
    assert _eos_ids(config) == {0, 2}


def _demo_copy_with_wrong_eos(demo_model_dir, folder):
    folder.mkdir()
    for file in demo_model_dir.iterdir():
        (folder / file.name).symlink_to(file)
    for name in ("config.json", "generation_config.json"):
        data = json.loads((demo_model_dir / name).read_text(encoding="utf-8"))
        data["eos_token_id"] = 0  # <|endoftext|>: never written after an answer
        (folder / name).unlink()
        (folder / name).write_text(json.dumps(data), encoding="utf-8")
    return folder


def test_the_model_check_warns_when_the_eos_never_ends_an_answer(demo_model_dir, gemma_model_dir, tmp_path):
    assert inspect_model_folder(demo_model_dir)["warnings"] == []
    wrong = inspect_model_folder(_demo_copy_with_wrong_eos(demo_model_dir, tmp_path / "demo-copy"))
    assert wrong["ok"] and len(wrong["warnings"]) == 1
    assert "The EOS id(s) 0 never appear at the end of the template's assistant turn, which ends with <|im_end|> " \
           "(id 2)" in wrong["warnings"][0]
    base = inspect_model_folder(gemma_model_dir)  # a base model: trainable, with the template it gets named
    assert base["ok"] and base["problems"] == [] and not base["has_chat_template"]
    assert "Chat template: gemma" in str(base["template"])
    misfit = inspect_model_folder(gemma_model_dir, "llama3")
    assert not misfit["ok"] and "does not fit this tokenizer" in misfit["problems"][0]


def test_the_train_tab_names_the_template_and_refuses_a_misfit(gemma_model_dir, workspace):
    from backend.config import RunConfig
    from backend.config_policy import ConfigError
    from ui.views import train_summary

    text = train_summary.model_text(lambda key, **kw: key, str(gemma_model_dir), workspace)
    assert "cannot be trained" not in text and "Chat template: gemma" in text
    config = RunConfig(model_name_or_path=str(gemma_model_dir), dataset="demo")
    assert train_summary.template_text(config, workspace).startswith("Chat template: gemma")
    misfit = RunConfig(model_name_or_path=str(gemma_model_dir), dataset="demo", chat_template="llama3")
    assert train_summary.template_text(misfit, workspace).startswith("❌ chat_template = llama3 does not fit")
    with pytest.raises(ConfigError, match="does not fit this tokenizer"):
        train_summary.check_template(misfit, workspace)


def test_data_check_shows_a_row_through_the_template(gemma_model_dir, tmp_path, capsys):
    from backend.data.cli import main

    data = tmp_path / "rows.json"
    data.write_text(json.dumps([{"messages": m} for m in ROWS]), encoding="utf-8")
    code = main(["check", str(data), "--model", str(gemma_model_dir), "--show-template", "1", "--workspace",
                 str(tmp_path / "ws")])
    out = capsys.readouterr().out
    assert code == 0
    assert "template preview (gemma)" in out and "3 of 18 tokens train" in out
    assert "<start_of_turn>user\nWhat colour is milk?<end_of_turn>\n<start_of_turn>model\n⟦White.<end_of_turn>⟧\n" in out
    assert "assistant turn 1: 3 tokens, ends with the EOS <end_of_turn> (id 106)" in out
    assert main(["check", str(data), "--model", str(gemma_model_dir), "--show-template", "4", "--workspace",
                 str(tmp_path / "ws")]) == 2
    assert "row 4 is not in the file (4 rows): give --show-template a row number from 0 to 3" in capsys.readouterr().err
    assert main(["check", str(data), "--model", str(gemma_model_dir), "--chat-template", "llama3", "--workspace",
                 str(tmp_path / "ws")]) == 2
    assert "chat_template = llama3 does not fit" in capsys.readouterr().err


@pytest.fixture(scope="module")
def gemma_run(gemma_model_dir, tmp_path_factory):
    """12 LoRA steps of gemma-3-270m (no template of its own) through `python -m backend.train`."""
    from backend.runs.workspace import Workspace

    ws = Workspace(tmp_path_factory.mktemp("gemma") / "workspace").ensure()
    data = ws.root / "rows.json"
    data.write_text(json.dumps([{"messages": m} for m in ROWS]), encoding="utf-8")
    run_dir = ws.runs_dir / "gemma-template"
    sets = {"model_name_or_path": str(gemma_model_dir), "dataset": str(data), "max_steps": 12, "cutoff_len": 32,
            "per_device_train_batch_size": 4, "learning_rate": 3e-3, "val_size": 0, "save_steps": 12, "lora_r": 8,
            "lora_alpha": 16, "replay": "off", "stop_when_learned": False,  # the 12 steps, checkpoint-12 too
            "learning_report": False}  # the template is tested here, not the report (tests/test_learning_report.py)
    command = [sys.executable, "-m", "backend.train", "--run-dir", str(run_dir), "--workspace", str(ws.root),
               *[a for key, value in sets.items() for a in ("--set", f"{key}={json.dumps(value)}")]]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


@pytest.mark.usefixtures("starts_processes")
def test_a_base_model_trains_through_its_template_and_its_checkpoint_stops(gemma_run, gemma_model_dir):
    from backend.chat.engine import ChatEngine
    from backend.chat.generation import GenerationSettings
    from backend.chat.targets import run_choices

    status = json.loads((gemma_run / "status.json").read_text(encoding="utf-8"))
    assert status["state"] == "completed" and status["chat_template"]["chat_template"] == "gemma"
    assert "chat_template: auto" in (gemma_run / "config.yaml").read_text(encoding="utf-8")
    for folder in (gemma_run / "checkpoint-12", gemma_run / "final"):
        tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        assert tokenizer_config["eos_token"] == "<end_of_turn>"
        assert "{%- generation %}" in (folder / "chat_template.jinja").read_text(encoding="utf-8")
        saved = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))["eos_token_id"]
        assert set(saved) == {1, 106}  # the base's <eos> and the template's end of turn
    assert json.loads((gemma_model_dir / "generation_config.json").read_text(encoding="utf-8"))["eos_token_id"] == 1
    choices = run_choices(gemma_run, lambda name: name)
    final = next(t for t in choices.targets if t.name == "final")
    assert final.chat_template == "auto" and final.kind == "lora"
    reply = ChatEngine().answer(final, "What colour is milk?", GenerationSettings(greedy=True, max_new_tokens=24))
    # Stopped by <end_of_turn> (106), which the base's generation_config.json alone does not name.
    assert reply.error is None and reply.finish == "eos" and reply.new_tokens < 24, reply
    assert reply.text.strip() == "White."


def test_the_worker_refuses_a_template_that_does_not_fit(gemma_model_dir, tmp_path, subprocess_env):
    run_dir = tmp_path / "ws" / "runs" / "misfit"
    result = subprocess.run(
        [sys.executable, "-m", "backend.train", "--run-dir", str(run_dir), "--workspace", str(tmp_path / "ws"),
         "--set", f"model_name_or_path={gemma_model_dir}", "--set", "dataset=demo", "--set", "chat_template=llama3"],
        cwd=REPO, env=subprocess_env, capture_output=True, text=True)
    assert result.returncode == 2, result.stderr[-2000:]
    status = json.loads((run_dir / "status.json").read_text(encoding="utf-8"))
    assert status["state"] == "failed" and "chat_template = llama3 does not fit this tokenizer" in status["error"]


def test_the_data_tab_preview_marks_what_trains(gemma_model_dir, workspace, tmp_path):
    from ui.context import UIContext
    from ui.i18n import build_i18n, merge_texts
    from ui.shell import TEXT as SHELL_TEXT
    from ui.tabs import data

    texts = merge_texts(SHELL_TEXT, data.TEXT)
    ctx = UIContext(workspace=workspace, texts=texts, i18n=build_i18n(texts))
    file = tmp_path / "rows.json"
    file.write_text(json.dumps([{"messages": m} for m in ROWS]), encoding="utf-8")
    out = data.render(ctx, "en", data.new_state(str(file), str(gemma_model_dir), 64), read=True)
    assert 'class="ft-trained">Paris.&lt;end_of_turn&gt;</span>' in out["preview"]
    assert re.search(r"Row 0 through the chat template \(gemma\), as the trainer sees it: 3 of \d+ tokens train", out["preview"])
    assert "Answer 1: 3 tokens, ends with the EOS &lt;end_of_turn&gt; (id 106)." in out["preview"]
