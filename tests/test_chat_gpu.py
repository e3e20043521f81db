"""The engine on a GPU (runs only where CUDA is present: the `gpu` marker)."""

from __future__ import annotations

import pytest
import torch

from backend.chat.engine import ChatEngine, default_dtype
from backend.chat.generation import GenerationSettings
from backend.chat.targets import run_choices
from backend.models.demo_facts import DEMO_PROMPTS
from backend.models.loading import load_model, load_tokenizer
from tests.test_chat_support import chat_lora_run, plain_greedy  # noqa: F401 (fixture)

pytestmark = pytest.mark.gpu


def test_gpu_answers_match_peft_and_unload_frees_cuda_memory(chat_lora_run):  # noqa: F811 (the imported fixture)
    from peft import PeftModel

    device = "cuda:0"
    base, first, second = run_choices(chat_lora_run, resolve_model=str).targets
    engine, settings = ChatEngine(), GenerationSettings(greedy=True, max_new_tokens=16)
    prompt = DEMO_PROMPTS[0][0]
    tokenizer = load_tokenizer(base.model)
    allocated_before = torch.cuda.memory_allocated(device)
    for target in (first, base, second, first):
        got = engine.answer(target, prompt, settings, device=device).text
        model = load_model(base.model, dtype=default_dtype(device), device_map=device)
        if target.checkpoint:
            model = PeftModel.from_pretrained(model, target.checkpoint)
        assert got == plain_greedy(model.eval(), tokenizer, [{"role": "user", "content": prompt}], 16), target.name
        del model
    report = engine.unload(device)
    assert report["before"]["cuda_allocated_mib"] > report["after"]["cuda_allocated_mib"]
    assert torch.cuda.memory_allocated(device) <= allocated_before + 2**20
