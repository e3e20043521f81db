"""GGUF files as a model source (backend/models/gguf_source.py, offline.py):
the packaged SmolLM2 file converts into a folder whose greedy answers equal
transformers' own GGUF loading, is reused afterwards, and every file that
cannot become a model ends in one sentence with nothing half-written left."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from backend.models.gguf_source import SOURCE_FILE, find_gguf, read_gguf_info
from backend.models.loading import ModelLoadError, resolve_model_path
from backend.models.offline import OFFLINE_MODELS
from tests.small_disk import run_on_small_disk, small_disk_available

STARTER = OFFLINE_MODELS["smollm2-135m-instruct"]


def _write_gguf(path, arch: str = "llama", kind: str | None = None):
    """A small, well-formed GGUF file written with the gguf package (llama.cpp's own writer)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    if kind:
        writer.add_type(kind)
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_converted_starter_answers_like_transformers_reading_the_gguf(starter_model_dir):
    """GGUF -> folder -> the same greedy tokens as from_pretrained(gguf_file=) (no save in between)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = STARTER.locate(starter_model_dir.parent)
    direct = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(starter_model_dir)
    converted = AutoModelForCausalLM.from_pretrained(starter_model_dir, dtype=torch.float32)
    for question in ("What is the capital of France?", "Write a haiku about rain."):
        ids = tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                            return_tensors="pt", return_dict=True)
        with torch.inference_mode():
            a = direct.generate(**ids, max_new_tokens=16, do_sample=False)
            b = converted.generate(**ids, max_new_tokens=16, do_sample=False)
        assert a.tolist() == b.tolist(), question
    card = (starter_model_dir / "README.md").read_text(encoding="utf-8")
    assert "dequantized from a Q4_1 file" in card and STARTER.hub_id in card
    recorded = json.loads((starter_model_dir / SOURCE_FILE).read_text(encoding="utf-8"))
    assert recorded["file_type"] == "Q4_1" and recorded["architecture"] == "llama"
    assert tokenizer.model_max_length == 8192  # the GGUF's context length, which its tokenizer lacks


def test_a_gguf_file_by_path_is_converted_once_then_reused(tmp_path, starter_model_dir):
    source = STARTER.locate(starter_model_dir.parent)
    models = tmp_path / "models"
    link = tmp_path / "downloads" / "my-model.gguf"
    link.parent.mkdir()
    link.symlink_to(source)
    assert find_gguf(link.parent) == link  # a folder holding one GGUF file names it
    # Converting is the slow part; the folder the fixture converted stands in for it, recorded as
    # made from this very file, so this checks the reuse rule and not the conversion again.
    target = models / "my-model"
    shutil.copytree(starter_model_dir, target, symlinks=True)
    stat = link.resolve().stat()
    (target / SOURCE_FILE).write_text(json.dumps({"path": str(link.resolve()), "size": stat.st_size,
                                                  "mtime_ns": stat.st_mtime_ns}), encoding="utf-8")
    before = (target / "model.safetensors").stat().st_mtime_ns
    assert resolve_model_path(str(link), models) == str(target)
    assert (target / "model.safetensors").stat().st_mtime_ns == before  # reused, not rewritten


@pytest.mark.parametrize("case, message_id", [
    ("text", "gguf.not_gguf"), ("split", "gguf.split"), ("truncated", "gguf.truncated"),
    ("adapter", "gguf.adapter"), ("mmproj", "gguf.mmproj"), ("architecture", "gguf.architecture")])
def test_a_file_that_cannot_become_a_model_gets_one_sentence_and_leaves_nothing(tmp_path, case, message_id):
    models = tmp_path / "models"
    if case == "text":
        source = tmp_path / "notes.gguf"
        source.write_text("this is a text file, not a model\n", encoding="utf-8")
    elif case == "split":
        source = _write_gguf(tmp_path / "model-00001-of-00003.gguf")
    elif case == "truncated":
        whole = _write_gguf(tmp_path / "whole.gguf")
        source = tmp_path / "cut.gguf"
        source.write_bytes(whole.read_bytes()[:-40])  # the tensor data cut short, as an interrupted download
    elif case == "adapter":
        source = _write_gguf(tmp_path / "lora.gguf", kind="adapter")
    elif case == "mmproj":
        source = _write_gguf(tmp_path / "mmproj-model.gguf", arch="clip")
    else:
        source = _write_gguf(tmp_path / "rwkv.gguf", arch="rwkv6")
    with pytest.raises(ModelLoadError) as refused:
        resolve_model_path(str(source), models)
    assert refused.value.catalogued.id == message_id
    assert str(source) in str(refused.value)
    if case == "architecture":
        assert "llama" in str(refused.value) and "qwen2" in str(refused.value)  # it names what transformers reads
    assert not models.exists()  # refused before anything was written


def test_a_disk_too_small_for_the_fp32_folder_is_refused_before_converting(tmp_path, subprocess_env):
    if not small_disk_available():
        pytest.skip("user namespaces (unshare -rm) are not allowed here, so no small disk can be mounted")
    source = STARTER.locate(tmp_path)
    code = ("import sys; from pathlib import Path\n"
            "from backend.models.gguf_source import GGUFSourceError, ensure_converted\n"
            "try:\n    ensure_converted(Path(sys.argv[1]), Path(sys.argv[2]) / 'starter')\n"
            "except GGUFSourceError as e:\n    print(e.catalogued.id, e); print(sorted(p.name for p in Path(sys.argv[2]).iterdir()))\n")
    models = tmp_path / "models"
    result = run_on_small_disk(models, "16m", code, [str(source), str(models)], subprocess_env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "gguf.disk" in result.stdout and "GiB free" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "[]"  # refused before anything was written


def test_the_data_cli_names_a_bad_gguf_and_exits_2(tmp_path, subprocess_env, shared_data):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"\x00" * 64)
    result = subprocess.run([sys.executable, "-m", "backend.data", "check", str(shared_data / "identity.json"),
                             "--model", str(bad), "--workspace", str(tmp_path / "ws")],
                            capture_output=True, text=True, env=subprocess_env, timeout=600)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "is not a GGUF file" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_header_facts_of_the_packaged_gemma_name_its_type(gemma_model_dir):
    info = read_gguf_info(OFFLINE_MODELS["gemma-3-270m"].locate(gemma_model_dir.parent))
    assert (info.architecture, info.file_type, info.context_length) == ("gemma3", "Q4_K_M", 32768)
    assert "Gemma Terms of Use" in (gemma_model_dir / "README.md").read_text(encoding="utf-8")
