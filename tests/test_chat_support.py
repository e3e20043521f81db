"""Builders shared by the chat tests: a run folder with real LoRA checkpoints
made with peft on the demo model (no worker needed), plus greedy references
computed the plain way (model.generate on a freshly loaded model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from backend.runs.files import mark_complete
from backend.storage.atomic_files import atomic_write_json


def make_lora_run(run_dir: Path, model_dir: Path, steps=(10, 20), incomplete_step: int | None = 30,
                  seed: int = 0) -> list[Path]:
    """A run folder whose checkpoint-<step>/ hold distinct real LoRA adapters.

    Each adapter is the demo model's LoRA with both matrices drawn from `seed`,
    so a seed gives the same adapters in every process and its greedy answers
    differ from the base's; trainer_state.json logs an
    eval_loss per checkpoint. `incomplete_step` gets no COMPLETE marker."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"model_name_or_path": str(model_dir), "method": "lora"}))
    atomic_write_json(run_dir / "status.json", {"state": "completed"})
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    peft_model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "o_proj"],
                                                 task_type="CAUSAL_LM"))
    folders = []
    all_steps = list(steps) + ([incomplete_step] if incomplete_step else [])
    for index, step in enumerate(all_steps):
        generator = torch.Generator().manual_seed(seed * 100 + index)
        with torch.no_grad():
            for name, param in peft_model.named_parameters():
                if "lora_A" in name:  # peft draws lora_A from the global generator: seed it too
                    param.copy_(torch.randn(param.shape, generator=generator) / param.shape[1] ** 0.5)
                elif "lora_B" in name:
                    param.copy_(torch.randn(param.shape, generator=generator) * 0.08)
        folder = run_dir / f"checkpoint-{step}"
        peft_model.save_pretrained(folder)
        history = [{"step": s, "eval_loss": round(2.0 / (i + 1), 4)} for i, s in enumerate(all_steps) if s <= step]
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": history}))
        if step != incomplete_step:
            mark_complete(folder)
        folders.append(folder)
    return folders


@pytest.fixture(scope="session")
def chat_lora_run(demo_model_dir, tmp_path_factory) -> Path:
    """workspace/runs/run-a with complete checkpoint-10 and -20 and an incomplete checkpoint-30."""
    run_dir = tmp_path_factory.mktemp("chat-ws") / "runs" / "run-a"
    make_lora_run(run_dir, demo_model_dir)
    return run_dir


def plain_greedy(model, tokenizer, messages: list[dict], max_new_tokens: int) -> str:
    """The reference: the model's own generate, no engine, no streamer."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                        return_dict=True, return_tensors="pt").to(model.device)
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


@pytest.fixture(autouse=False, scope="module")
def single_thread():
    """One intra-op thread while a module runs: on 2 shared cores, two OpenMP
    threads fighting other processes made tiny-model generation 40x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
