"""GGUF files as a model source (backend/models/gguf_source.py, offline.py):
the packaged SmolLM2 file converts into a folder whose greedy answers equal
transformers' own GGUF loading, is reused afterwards, and every file that
cannot become a model ends in one sentence with nothing half-written left."""

from __future__ import annotations

import json
import logging
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from backend.models.gguf_source import SOURCE_FILE, read_gguf_info
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


def test_a_gguf_file_by_path_is_converted_once_as_a_stage_of_the_run_then_reused(tmp_path, starter_model_dir):
    """A GGUF file a user names (here through a folder holding it) becomes models/<stem>/, with the
    conversion shown as the run's stage (status.json and train.log), and is reused after that."""
    from backend.runs.files import read_status, update_status
    from backend.runs.model_builds import prepare_model

    source = STARTER.locate(starter_model_dir.parent)
    models, run_dir = tmp_path / "models", tmp_path / "runs" / "r1"
    link = tmp_path / "downloads" / "my-model.gguf"
    link.parent.mkdir()
    link.symlink_to(source)
    run_dir.mkdir(parents=True)
    update_status(run_dir, state="running")
    stages, logger = [], logging.getLogger("backend.train")

    class Seen(logging.Handler):
        def emit(self, record):
            stages.append((record.getMessage(), read_status(run_dir).get("stage")))

    handler = Seen(logging.INFO)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        path = prepare_model(str(link.parent), models, run_dir)
    finally:
        logger.removeHandler(handler)
    assert path == str(models / "my-model") and (models / "my-model" / "config.json").is_file()
    assert any(stage and stage["name"] == "convert_model" for _, stage in stages)
    assert any("converting" in message and "step 4 / 4" in message for message, _ in stages)
    assert read_status(run_dir).get("stage") is None and not list(models.glob(".my-model-convert-*"))
    before = (models / "my-model" / "model.safetensors").stat().st_mtime_ns
    assert resolve_model_path(str(link), models) == str(models / "my-model")
    assert (models / "my-model" / "model.safetensors").stat().st_mtime_ns == before  # reused, not rewritten


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


def _crafted_gguf(path, value: bytes):
    """114 bytes: GGUF magic, version 3, no tensors, one key whose value (its type, then what follows) is `value`."""
    key = b"general.architecture"
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + value
    path.write_bytes(header.ljust(114, b"\0"))
    return path


@pytest.mark.parametrize("value, claim", [
    (struct.pack("<IIQ", 9, 0, 2**40), "key 'general.architecture' claims an array of 1099511627776 items"),
    (struct.pack("<IIQ", 9, 8, 2**40), "key 'general.architecture' claims an array of 1099511627776 items"),
    (struct.pack("<IQ", 8, 2**40), "key 'general.architecture' claims a string of 1099511627776 bytes")],
    ids=["array", "array of strings", "string"])
def test_a_header_claiming_more_than_the_file_holds_is_refused_before_reading_it(tmp_path, value, claim):
    """gguf's reader trusts the counts: an array of 2**40 bytes in a 114-byte file made it loop until memory ran out."""
    import tracemalloc

    import gguf  # noqa: F401 - imported before measuring: read_gguf_info imports it and transformers' table
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES  # noqa: F401

    from backend.models.gguf_source import GGUFSourceError
    from backend.models.loading import has_own_chat_template

    source = _crafted_gguf(tmp_path / "crafted.gguf", value)
    tracemalloc.start()
    try:
        with pytest.raises(GGUFSourceError) as refused:
            read_gguf_info(source)
        templated = has_own_chat_template(str(source), tmp_path / "models")  # the Train tab's model field asks this
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused.value.catalogued.id == "gguf.truncated"
    said = str(refused.value)
    assert said.startswith(f"{source} is cut short or damaged ({claim} at byte ") and "bytes are left" in said, said
    assert said.count(". ") == 0 and not templated
    assert peak < 10 * 2**20, f"{peak / 2**20:.0f} MiB"


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


@pytest.mark.parametrize("stem", ["gemma-3-270m", "smollm2-135m-instruct", "demo", "Demo-Tiny"])
def test_a_gguf_file_named_like_a_built_in_model_gets_its_own_folder(tmp_path, stem):
    """Converting the user's file must not replace (rmtree) the offline or demo model's folder."""
    from pathlib import Path

    from backend.models.loading import gguf_model_name

    name = gguf_model_name(Path(tmp_path / f"{stem}.gguf"))
    assert name.lower() not in {"gemma-3-270m", "smollm2-135m-instruct", "demo", "demo-tiny"}
    assert gguf_model_name(Path(tmp_path / "my-model.Q4_K_M.gguf")) == "my-model.Q4_K_M"


def test_a_gguf_file_by_path_has_its_own_chat_template_when_its_header_holds_one(tmp_path):
    """Replay's auto and the Plan ask this: an instruct GGUF file carries its template like a folder does."""
    import gguf

    from backend.models.loading import has_own_chat_template

    base = _write_gguf(tmp_path / "base.gguf")
    writer = gguf.GGUFWriter(str(tmp_path / "chat.gguf"), "llama")
    writer.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert has_own_chat_template(str(tmp_path / "chat.gguf"), tmp_path / "models")
    assert not has_own_chat_template(str(base), tmp_path / "models")


def test_two_gguf_files_of_one_name_convert_into_two_folders(tmp_path):
    from backend.models.loading import gguf_folder

    models = tmp_path / "models"
    first, second = tmp_path / "a" / "model.gguf", tmp_path / "b" / "model.gguf"
    (models / "model").mkdir(parents=True)
    (models / "model" / SOURCE_FILE).write_text(json.dumps({"path": str(first.resolve())}), encoding="utf-8")
    assert gguf_folder(first, models) == models / "model"  # its own conversion: reused
    other = gguf_folder(second, models)
    assert other != models / "model" and other.name.startswith("model-")  # the first one stays


def test_a_refused_conversion_leaves_no_lock_file_in_models(tmp_path):
    """A file whose header passes but that transformers cannot read: refused inside the conversion's lock,
    which left models/.NAME.lock behind (and one per refused file)."""
    source = _write_gguf(tmp_path / "no-tokenizer.gguf")  # llama, one tensor, no vocabulary
    models = tmp_path / "models"
    with pytest.raises(ModelLoadError) as refused:
        resolve_model_path(str(source), models)
    assert str(source) in str(refused.value)
    assert sorted(p.name for p in models.iterdir()) == [], "left in models/"


def test_a_lock_removed_by_its_holder_still_keeps_its_takers_apart(tmp_path):
    """file_lock(remove=True) unlinks the file while held; a taker that waited on the old file must lock the
    new one, or two holders would be inside at once."""
    from backend.storage.file_lock import file_lock

    path, inside, overlaps = tmp_path / ".x.lock", [], []

    def take(n: int) -> None:
        for _ in range(n):
            with file_lock(path, remove=True):
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(len(inside))
                time.sleep(0.001)
                inside.pop()

    threads = [threading.Thread(target=take, args=(40,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlaps == [] and not path.exists()
