"""GGUF export through llama.cpp's own converter and quantizer, checked by running the files
in llama.cpp, with the Modelfile Ollama needs and the refusals a user can hit."""

from __future__ import annotations

import json

import pytest

from backend.export import llama_cpp_tools as tools
from backend.export.exporter import export_checkpoint
from backend.export.gguf_judgement import LEVEL_MAX_KL
from backend.export.outputs import ExportError


# The session's one export (tests/conftest.py), shared with the Chat and serve tests of GGUF files.
@pytest.fixture
def small_model(gguf_model_dir):
    return gguf_model_dir


@pytest.fixture
def exported(gguf_export):
    """(export folder, report) of the run's final adapter as f16 + q8_0 + q4_k_m, through the CLI."""
    return gguf_export


def test_every_level_is_written_next_to_the_kept_merged_model(exported):
    out, report = exported
    gguf = report["gguf"]
    assert (out / "config.json").is_file() and list(out.glob("*.safetensors"))  # the merged model stays
    assert set(gguf["files"]) == {"f16", "q8_0", "q4_k_m"}
    sizes = {level: info["bytes"] for level, info in gguf["files"].items()}
    assert sizes["q4_k_m"] < sizes["q8_0"] < sizes["f16"]
    for level, info in gguf["files"].items():
        assert (out / "gguf" / info["file"]).is_file()
        assert abs(info["bytes"] - gguf["planned_bytes"][level]) < 0.25 * info["bytes"]  # the size shown before
    assert not list((out / "gguf").glob("*.partial"))


def test_the_template_and_eos_travel_into_every_file(exported):
    _, report = exported
    for level, check in report["gguf"]["metadata"].items():
        assert check["chat_template_same"], level
        assert check["eos_is_a_stop_token"], level
        assert check["architecture"] == "llama"


def test_llama_cpp_answers_like_the_adapter_and_each_quant_is_measured(exported):
    _, report = exported
    checks = report["gguf"]["checks"]
    f16 = checks["levels"]["f16"]
    assert f16["total"] == 10
    assert f16["agree_first_8"] >= 9, json.dumps(f16["rows"], indent=1, ensure_ascii=False)
    assert f16["same_prompt_tokens"] == 10  # llama.cpp tokenises the rendered prompt as transformers does
    assert f16["passed"] and checks["levels"]["q8_0"]["passed"]
    # Every level judged by its numbers: on this two-layer model q4_k_m agreed on 1 of 10 answers (KL 0.07),
    # so it is flagged, the export does not pass (the command exits 1) and the Modelfile runs q8_0.
    for level, entry in checks["levels"].items():
        if level != "f16":
            assert entry["passed"] == (entry["agree_first_8"] >= 8 and entry["mean_kl"] <= LEVEL_MAX_KL), level
    failed = [level for level, entry in checks["levels"].items() if not entry["passed"]]
    assert report["gguf"]["failed_levels"] == failed and report["gguf"]["passed"] == (not failed)
    for level in ("q8_0", "q4_k_m"):
        entry = checks["levels"][level]
        assert entry["positions"] > 20 and entry["mean_kl"] >= 0
        assert 0 < entry["top1_agreement"] <= 1
    # q8_0 keeps the distribution closer to f16 than q4_k_m does
    assert checks["levels"]["q8_0"]["mean_kl"] < checks["levels"]["q4_k_m"]["mean_kl"]


def test_the_modelfile_renders_like_training_and_stops_on_the_end_of_turn(exported, small_model):
    from backend.export.modelfile import FAMILIES, SAMPLES, match_family
    from backend.models.loading import load_tokenizer

    out, report = exported
    text = (out / "gguf" / "Modelfile").read_text(encoding="utf-8")
    chosen = report["gguf"]["modelfile_level"]  # the smallest level that passed its check
    assert chosen in report["gguf"]["files"] and chosen not in report["gguf"]["failed_levels"]
    assert text.startswith(f"FROM ./{report['gguf']['files'][chosen]['file']}\n")
    assert 'PARAMETER stop "<|im_end|>"' in text
    assert "PARAMETER num_ctx 4096\n" in text  # the run's cutoff_len 128 is below Ollama's default; the model has 8192
    assert "TEMPLATE \"\"\"" in text and report["gguf"]["template_family"] == "chatml"
    # SmolLM2's template inserts its own system prompt when a chat has none: the Modelfile says it too
    assert 'SYSTEM """You are a helpful AI assistant named SmolLM, trained by Hugging Face"""' in text
    assert "ollama create assistant -f" in report["gguf"]["ollama"]
    tokenizer = load_tokenizer(small_model)
    match = match_family(tokenizer)
    chatml = next(f for f in FAMILIES if f.name == "chatml")
    assert match.family is chatml
    assert chatml.render(match.system, SAMPLES[0]) == tokenizer.apply_chat_template(
        SAMPLES[0], tokenize=False, add_generation_prompt=True)


def test_the_lora_gguf_and_the_model_card(exported):
    from gguf import GGUFReader

    out, report = exported
    lora = out / "gguf" / report["gguf"]["lora"]["file"]
    reader = GGUFReader(str(lora))
    assert reader.get_field("general.type").contents() == "adapter"
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "## GGUF" in card and "mean KL vs f16" in card and "ollama create" in card


@pytest.mark.usefixtures("starts_processes")
def test_the_demo_models_own_tokenizer_is_refused_and_the_merged_model_kept(tmp_path, workspace, demo_model_dir):
    """The demo model's byte-level BPE was trained here: llama.cpp's converter does not know it."""
    from tests.eval_export_runs import cached_run

    run = cached_run(workspace, demo_model_dir, "lora")
    out = tmp_path / "demo-export"
    with pytest.raises(ExportError) as refused:
        export_checkpoint(run / "checkpoint-8", out, gguf=["q8_0"], make_zip=False, workspace=workspace)
    text = str(refused.value)
    assert "does not know the tokenizer" in text and "merged model" in text and str(out) in text
    assert (out / "config.json").is_file()  # the merged model is complete and kept
    assert not list((out / "gguf").glob("*.gguf*"))  # no partial file left behind


@pytest.mark.parametrize("level, words", [("iq2_xs", "importance matrix"), ("q3_weird", "is not one this export")])
def test_levels_that_cannot_be_written_are_refused_before_anything_runs(level, words):
    with pytest.raises(ExportError, match=words):
        tools.parse_levels([level])


def test_a_converter_from_another_release_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "llama.cpp"
    folder.mkdir()
    (folder / "convert_hf_to_gguf.py").write_text("", encoding="utf-8")
    (folder / "VERSION").write_text("0.0.1\n", encoding="utf-8")
    monkeypatch.setenv(tools.TOOLS_ENV, str(folder))
    with pytest.raises(ExportError, match="different releases"):
        tools.check_tools()


def test_dora_adapters_are_refused_for_a_gguf_lora(tmp_path):
    from backend.export.gguf_export import export_lora_gguf

    (tmp_path / "adapter_config.json").write_text(json.dumps({"use_dora": True}), encoding="utf-8")
    with pytest.raises(ExportError, match="DoRA"):
        export_lora_gguf(tmp_path, str(tmp_path), tmp_path / "out", "x", "f16")


@pytest.mark.parametrize("family", ["chatml", "llama3", "gemma"])
def test_each_training_template_family_gets_its_ollama_template(gemma_model_dir, family):
    """The templates the real-model runs train with (backend/models/chat_templates.py) each match
    the Go template of their family, rendered the same on single, system and multi-turn chats."""
    from backend.export.modelfile import match_family
    from backend.models.chat_templates import KNOWN
    from backend.models.loading import load_tokenizer

    tokenizer = load_tokenizer(gemma_model_dir)
    tokenizer.chat_template = KNOWN[family].template
    match = match_family(tokenizer)
    assert match.family is not None and match.family.name == family and match.system is None


def test_a_template_no_family_expresses_gets_no_template_and_a_sentence(gemma_model_dir):
    from backend.export.modelfile import build_modelfile, match_family
    from backend.models.loading import load_tokenizer

    tokenizer = load_tokenizer(gemma_model_dir)
    tokenizer.chat_template = "{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}\n{% endfor %}### assistant:"
    match = match_family(tokenizer)
    assert match.family is None and match.reason.startswith("### user: Hi there.")
    assert "TEMPLATE" not in build_modelfile("m.gguf", match, ["</s>"], 4096)


@pytest.mark.usefixtures("starts_processes")
def test_an_architecture_the_converter_does_not_know_is_named(tmp_path, gguf_model_dir):
    """llama.cpp's real converter on a model folder whose architecture it has no class for."""
    import shutil

    if not tools.tools_folder().joinpath("convert_hf_to_gguf.py").is_file():
        pytest.fail("llama.cpp's converter is not installed: run `make gguf-tools`")
    model = tmp_path / "odd-model"
    shutil.copytree(gguf_model_dir, model)
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    config["architectures"] = ["StudioOddForCausalLM"]
    (model / "config.json").write_text(json.dumps(config), encoding="utf-8")
    out = tmp_path / "odd-f16.gguf"
    with pytest.raises(ExportError, match="does not support the architecture") as refused:
        tools.convert_hf_to_gguf(model, out, "f16", tmp_path / "convert.log")
    assert "StudioOddForCausalLM" in str(refused.value) and not out.exists()


def test_a_check_that_fails_says_so_and_keeps_the_file(exported, small_model):
    """The same f16 file judged against answers it does not give: not passed, rows show where they part."""
    from backend.export.gguf_export import GGUFRequest, run_checks
    from backend.models.loading import load_tokenizer

    out, report = exported
    f16 = out / "gguf" / report["gguf"]["files"]["f16"]["file"]
    tokenizer = load_tokenizer(out)
    prompts = [[{"role": "user", "content": "What is the capital of France?"}],
               [{"role": "user", "content": "Name a colour."}]]
    wrong = [tokenizer("Certainly not this answer at all", add_special_tokens=False)["input_ids"]] * 2
    checks = run_checks({"f16": f16}, tokenizer, GGUFRequest([tools.LEVELS["f16"]], prompts, ["", ""], wrong))
    assert not checks["passed"] and checks["levels"]["f16"]["agree_first_8"] < 2
    assert all(row["agree_first"] < 8 and row["reference"] for row in checks["levels"]["f16"]["rows"])
    assert f16.is_file()
