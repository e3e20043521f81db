"""A small real model llama.cpp's converter accepts, and a LoRA run on it, for the GGUF tests.

The demo model's tokenizer was trained here, and llama.cpp's converter refuses
any BPE tokenizer it does not know (that refusal is tested too). So the fast
case is SmolLM2-135M-Instruct cut to its first two layers: its real
tokenizer, template and embeddings, 35M parameters, trained for a few steps
by the real worker.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from backend.config_recipes import tiny_config
from backend.runs.files import read_status
from backend.runs.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def build_two_layer_smollm2(starter: Path, folder: Path) -> Path:
    """SmolLM2 with only its first two decoder layers (real weights) and its own tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM

    if (folder / "config.json").is_file():
        return folder
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    model = AutoModelForCausalLM.from_pretrained(starter, num_hidden_layers=2, dtype=torch.float32)
    model.save_pretrained(staging)
    for name in TOKENIZER_FILES:
        if (starter / name).is_file():
            shutil.copy2(starter / name, staging / name)
    staging.rename(folder)
    return folder


def train_lora(model_dir: Path, root: Path, env: dict, run_id: str = "gguf-run", sets: tuple[str, ...] = ()) -> Path:
    """A short LoRA run through the real worker CLI on the demo data; returns the run folder."""
    workspace = Workspace(root / "workspace").ensure()
    config = tiny_config(model_name_or_path=str(model_dir), dataset="demo", val_size=0.2, max_steps=6,
                         save_steps=6, learning_rate=2e-3, cutoff_len=128, replay="off",
                         learning_report=False)  # what GGUF files are checked on is the run's adapter, not its report
    config_file = workspace.root / "gguf.yaml"
    config.save(config_file)
    run_dir = workspace.runs_dir / run_id
    command = [sys.executable, "-m", "backend.train", "--config", str(config_file), "--run-dir", str(run_dir),
               "--workspace", str(workspace.root), *[a for item in sets for a in ("--set", item)]]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    status = read_status(run_dir)
    assert done.returncode == 0 and status.get("state") == "completed", done.stderr[-3000:]
    return run_dir


def export_gguf_cli(checkpoint: Path, out: Path, env: dict) -> dict:
    """`python -m backend.export --gguf q4_k_m q8_0 f16 --gguf-lora f16` as a user runs it; returns its report."""
    import json

    command = [sys.executable, "-m", "backend.export", "--checkpoint", str(checkpoint), "--out", str(out),
               "--gguf", "q4_k_m", "q8_0", "f16", "--gguf-lora", "f16", "--no-zip", "--json"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=env)
    assert done.returncode in (0, 1), done.stderr[-3000:] + done.stdout[-2000:]
    report = json.loads(done.stdout)
    # 1 when a level failed its check: the two-layer model's q4_k_m parts from the adapter's answers
    assert done.returncode == (0 if report["gguf"]["passed"] else 1), report["gguf"]["failed_levels"]
    return report
