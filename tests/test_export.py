"""Export: adapter folder + zip, merged model (LoRA and QLoRA) verified against
the adapter, loadable in a fresh process, and the refusals a user can hit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile

import pytest

from backend.export.exporter import export_checkpoint
from backend.export.outputs import ExportError, ensure_disk_space, parse_size
from backend.runs.workspace import Workspace
from tests.eval_export_runs import cached_run, checkpoint_names, copy_run, link_demo_model, one_torch_thread

PROMPT = [{"role": "user", "content": "What is the capital of France?"}]


pytestmark = pytest.mark.usefixtures("one_torch_thread")
_ = one_torch_thread  # the fixture, imported for pytest to find


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory, demo_model_dir, short_demo_run):
    """A copy of the session's short demo LoRA run (24 steps), trained by the real worker."""
    workspace = Workspace(tmp_path_factory.mktemp("export") / "workspace").ensure()
    link_demo_model(workspace, demo_model_dir)
    return copy_run(short_demo_run, workspace, "demo-run")


def _adapter_answer(base_path, checkpoint):
    """The checkpoint's greedy answer through plain peft, independently of backend.export."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32),
                                      checkpoint).eval()
    ids = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**ids, do_sample=False, max_new_tokens=24)
    return tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True).strip()


FRESH_LOAD = """
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
messages = [{"role": "user", "content": "What is the capital of France?"}]
ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
out = model.generate(**ids, do_sample=False, max_new_tokens=24)
print(json.dumps(tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True).strip()))
"""


@pytest.mark.slow
def test_merged_export_matches_adapter_and_loads_in_a_fresh_process(lora_run, subprocess_env, tmp_path):
    checkpoint = lora_run / "final"
    out = tmp_path / "exports" / "merged"
    report = export_checkpoint(checkpoint, out, merge=True, shard_size="1MB", dtype="auto")
    assert report["kind"] == "merged" and report["dtype"] == "fp32"  # fp32 demo base on the CPU
    assert report["verification"]["passed"], report["verification"]
    names = {p.name for p in out.iterdir()}
    shards = [n for n in names if n.startswith("model-") and n.endswith(".safetensors")]
    assert len(shards) > 1 and "model.safetensors.index.json" in names  # 1 MB shards of a ~4 MB model
    assert {"tokenizer.json", "generation_config.json", "README.md", "config.json"} <= names
    assert "adapter_config.json" not in names and not any(n.endswith(".bin") for n in names)
    card = (out / "README.md").read_text(encoding="utf-8")
    # The demo model has no hub id: named in the text, no local path as base_model in the metadata.
    assert "base_model:" not in card and "Fine-tuned from the local model `demo`" in card
    assert str(lora_run.parents[1]) not in card
    assert "## Training hyperparameters" in card and "| lora_r | 16 |" in card
    assert "## Data" in card and "Verification passed" in card
    with zipfile.ZipFile(report["zip"]) as archive:
        assert "merged/model.safetensors.index.json" in archive.namelist()

    demo = lora_run.parents[1] / "models" / "demo"
    expected = _adapter_answer(str(demo), str(checkpoint))
    fresh = subprocess.run([sys.executable, "-c", FRESH_LOAD, str(out)], env=subprocess_env,
                           capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    assert json.loads(fresh.stdout.strip().splitlines()[-1]) == expected
    base_answer = _plain_answer(str(demo))
    assert expected != base_answer, "the adapter should change the answer, else the check proves nothing"


def _plain_answer(path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ids = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**ids, do_sample=False, max_new_tokens=24)
    return tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True).strip()


@pytest.mark.slow
def test_adapter_export_refuses_an_existing_folder(lora_run, tmp_path, subprocess_env):
    first, last = checkpoint_names(lora_run)[0], checkpoint_names(lora_run)[-1]
    out = tmp_path / "exports" / "adapter"
    report = export_checkpoint(lora_run / first, out)
    names = {p.name for p in out.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "README.md"} <= names
    assert "optimizer.pt" not in names and "COMPLETE" not in names and "trainer_state.json" not in names
    with zipfile.ZipFile(report["zip"]) as archive:
        assert "adapter/adapter_model.safetensors" in archive.namelist()
    before = (out / "adapter_model.safetensors").read_bytes()

    with pytest.raises(ExportError, match="already exists.*Overwrite"):
        export_checkpoint(lora_run / last, out)
    assert (out / "adapter_model.safetensors").read_bytes() == before  # untouched
    cli = subprocess.run([sys.executable, "-m", "backend.export", "--checkpoint", str(lora_run / last),
                          "--out", str(out)], env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2 and "already exists" in cli.stderr and "Traceback" not in cli.stderr

    export_checkpoint(lora_run / last, out, overwrite=True)
    assert (out / "adapter_model.safetensors").read_bytes() != before
    assert not list(out.parent.glob(".*partial*"))


def test_qlora_checkpoint_merges_into_a_16_bit_base(tmp_path, demo_model_dir):
    import torch
    from safetensors.torch import load_file

    workspace = Workspace(tmp_path / "workspace").ensure()
    link_demo_model(workspace, demo_model_dir)
    run = cached_run(workspace, demo_model_dir, "qlora")
    out = workspace.root / "exports" / "qlora-merged"
    report = export_checkpoint(run / "checkpoint-4", out, merge=True, dtype="bf16", make_zip=False)
    verification = report["verification"]
    # bf16 rounding can swap near-equal tokens: such answers are ties, never counted as passed.
    assert verification["differ"] == 0 and verification["verdict"] in ("passed", "ties"), verification
    assert verification["passed"] == (verification["equal"] == verification["total"])
    assert (out / "config.json").is_file()  # ties keep the export
    assert any("4/8-bit" in note for note in report["notes"])
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "bfloat16"

    # Independent merge: W + (alpha / r) * B @ A from the base's and the adapter's own files.
    base = load_file(str(demo_model_dir / "model.safetensors"))
    adapter = load_file(str(run / "checkpoint-4" / "adapter_model.safetensors"))
    merged = load_file(str(out / "model.safetensors"))
    scale = 16 / 8
    checked = 0
    for key, a in adapter.items():
        if ".lora_A." not in key:
            continue
        b = adapter[key.replace(".lora_A.", ".lora_B.")]
        name = key.replace("base_model.model.", "").replace(".lora_A.weight", ".weight")
        expected = (base[name].float() + scale * b.float() @ a.float()).to(torch.bfloat16)
        assert merged[name].dtype == torch.bfloat16
        assert torch.equal(merged[name], expected) or torch.allclose(merged[name].float(), expected.float(), atol=1e-2)
        assert not torch.equal(merged[name], base[name].to(torch.bfloat16))  # the adapter did change it
        checked += 1
    layers = json.loads((demo_model_dir / "config.json").read_text())["num_hidden_layers"]
    assert checked == 7 * layers  # q, k, v, o, gate, up, down in every decoder block


def test_full_run_checkpoint_is_copied(tmp_path, demo_model_dir):
    workspace = Workspace(tmp_path / "workspace").ensure()
    link_demo_model(workspace, demo_model_dir)
    run = cached_run(workspace, demo_model_dir, "full")
    report = export_checkpoint(run / "checkpoint-2", workspace.root / "exports" / "full", merge=True, make_zip=False)
    assert report["kind"] == "full" and "nothing to merge" in report["message"]
    assert report["verification"]["passed"]
    assert (workspace.root / "exports" / "full" / "model.safetensors").is_file()


def test_clear_messages_for_disk_and_sizes(tmp_path):
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(ExportError, match="Not enough disk space.*GB"):
        ensure_disk_space(tmp_path, free + 10**12)
    assert parse_size("2GB") == 2 * 10**9 and parse_size("500MiB") == 500 * 2**20
    with pytest.raises(ExportError, match="write it like 2GB"):
        parse_size("two gigs")
    with pytest.raises(ExportError, match="neither a LoRA adapter"):
        export_checkpoint(tmp_path, tmp_path / "out")
