"""Model loading, folder checks, presets and name resolution (on the demo model)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from backend.models.loading import (
    PRESETS,
    ModelLoadError,
    estimate_num_parameters,
    inspect_model_folder,
    load_model,
    load_tokenizer,
    model_context_length,
    resolve_model_path,
)


@pytest.fixture
def demo_copy(tmp_path, demo_model_dir):
    """A private copy of the demo model that a test may break."""
    return shutil.copytree(demo_model_dir, tmp_path / "model")


def test_inspect_demo_folder_is_ok(demo_model_dir):
    report = inspect_model_folder(demo_model_dir)
    assert report["ok"] and report["problems"] == []
    assert report["architecture"] == "Qwen2ForCausalLM"
    assert report["context_length"] == model_context_length(demo_model_dir) == 512
    assert report["has_tokenizer"] and report["has_chat_template"]
    actual = sum(p.numel() for p in load_model(demo_model_dir).parameters())
    assert abs(report["num_parameters"] - actual) / actual < 0.05


@pytest.mark.parametrize("remove, expected", [
    ("config.json", "config.json is missing"),
    ("tokenizer.json", "No tokenizer files"),
    ("model.safetensors", "No weights"),
])
def test_inspect_names_what_is_missing(demo_copy, remove, expected):
    (demo_copy / remove).unlink()
    report = inspect_model_folder(demo_copy)
    assert not report["ok"]
    assert len(report["problems"]) == 1 and expected in report["problems"][0], report["problems"]


def test_a_folder_without_a_chat_template_is_named_the_one_it_gets(demo_copy):
    (demo_copy / "chat_template.jinja").unlink()
    report = inspect_model_folder(demo_copy)
    assert report["ok"] and not report["has_chat_template"], report["problems"]
    assert str(report["template"]).startswith("Chat template: chatml (the model has none; matched by its architecture)")
    assert not inspect_model_folder(demo_copy, "own")["ok"]


def test_inspect_bad_json_and_missing_folder(demo_copy, tmp_path):
    (demo_copy / "config.json").write_text("{not json", encoding="utf-8")
    assert "not valid JSON" in inspect_model_folder(demo_copy)["problems"][0]
    report = inspect_model_folder(tmp_path / "nowhere")
    assert not report["ok"] and "is not a folder" in report["problems"][0]


def test_preset_numbers_agree_with_the_parameter_estimate():
    assert {"Qwen/Qwen2.5-0.5B-Instruct", "meta-llama/Llama-3.2-1B-Instruct",
            "HuggingFaceTB/SmolLM2-360M-Instruct"} <= set(PRESETS)
    for hub_id, preset in PRESETS.items():
        config = {"hidden_size": preset.hidden_size, "num_hidden_layers": preset.num_layers,
                  "num_attention_heads": preset.num_heads, "num_key_value_heads": preset.num_kv_heads,
                  "intermediate_size": preset.intermediate_size, "vocab_size": preset.vocab_size,
                  "tie_word_embeddings": preset.tie_word_embeddings, "head_dim": preset.head_dim}
        estimate = estimate_num_parameters(config)
        assert abs(estimate - preset.num_parameters) / preset.num_parameters < 0.03, hub_id


def test_resolve_model_path(workspace, demo_copy):
    assert resolve_model_path("demo", workspace.models_dir) == str(workspace.models_dir / "demo")
    assert resolve_model_path(str(demo_copy), workspace.models_dir) == str(demo_copy)
    assert resolve_model_path("Qwen/Qwen2.5-0.5B-Instruct", workspace.models_dir) == "Qwen/Qwen2.5-0.5B-Instruct"


def test_unknown_hub_id_fails_clearly_offline(monkeypatch, workspace):
    import huggingface_hub.constants

    # Never touch the network in tests: the hub client refuses every request.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    name = resolve_model_path("nobody/no-such-model", workspace.models_dir)
    with pytest.raises(ModelLoadError, match="not a local folder and could not be downloaded"):
        load_tokenizer(name)
    with pytest.raises(ModelLoadError, match="nobody/no-such-model is not a local folder"):
        load_model(name)


def test_missing_folder_and_missing_tokenizer_name_the_path(tmp_path, demo_copy):
    missing = tmp_path / "not-here"
    with pytest.raises(ModelLoadError, match=f"{missing} does not exist"):
        load_model(str(missing))
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_tokenizer(str(missing))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (demo_copy / name).unlink()
    with pytest.raises(ModelLoadError, match=f"No tokenizer files in {demo_copy}"):
        load_tokenizer(demo_copy)
    (demo_copy / "config.json").unlink()
    with pytest.raises(ModelLoadError, match="config.json is missing"):
        load_model(demo_copy)


def test_tokenizer_without_pad_token_gets_one(demo_copy):
    config_file = demo_copy / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["pad_token"] = None
    config_file.write_text(json.dumps(config), encoding="utf-8")
    tokenizer = load_tokenizer(demo_copy)
    assert tokenizer.pad_token == tokenizer.eos_token == "<|im_end|>"


@pytest.mark.parametrize("bits, layer_class", [(4, "Linear4bit"), (8, "Linear8bitLt")])
def test_quantized_loading_on_cpu(demo_model_dir, bits, layer_class):
    model = load_model(demo_model_dir, quantization_bits=bits)
    classes = {type(module).__name__ for module in model.modules()}
    assert layer_class in classes
    tokenizer = load_tokenizer(demo_model_dir)
    inputs = tokenizer("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits
    assert torch.isfinite(logits).all()
    if bits == 4:
        config = model.config.quantization_config
        assert config.bnb_4bit_quant_type == "nf4" and config.bnb_4bit_use_double_quant


def test_bad_quantization_bits(demo_model_dir):
    with pytest.raises(ModelLoadError, match="must be 4 or 8"):
        load_model(demo_model_dir, quantization_bits=3)
