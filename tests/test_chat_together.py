"""Five chat columns answered together (one batch for the base and its LoRA checkpoints,
peft `adapter_names`) give the same greedy answers as one column at a time, and stream
side by side instead of one column after another."""

from __future__ import annotations

import pytest
import torch

from backend.chat.engine import ChatEngine
from backend.chat.generation import GenerationSettings, Reply
from backend.chat.targets import run_choices, target_for_folder
from backend.models.demo_facts import DEMO_PROMPTS
from backend.models.loading import load_model
from tests.test_chat_support import make_lora_run, single_thread  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

TOKENS = 20
# Earlier turns of different lengths per column, so the batch really is left-padded.
HISTORIES = [
    [],
    [{"role": "user", "content": DEMO_PROMPTS[1][0]}, {"role": "assistant", "content": DEMO_PROMPTS[1][1]}],
    [],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help you today?"},
     {"role": "user", "content": DEMO_PROMPTS[2][0]}, {"role": "assistant", "content": DEMO_PROMPTS[2][1]}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
]


@pytest.fixture(scope="module")
def columns(demo_model_dir, tmp_path_factory):
    """base, three LoRA checkpoints of one run, a DoRA checkpoint and a full fine-tuned checkpoint."""
    from peft import LoraConfig, get_peft_model

    root = tmp_path_factory.mktemp("together")
    make_lora_run(root / "runs" / "run-a", demo_model_dir, steps=(10, 20, 30), incomplete_step=None, seed=3)
    targets = run_choices(root / "runs" / "run-a", resolve_model=str).targets
    model = load_model(demo_model_dir, dtype=torch.float32)
    with torch.no_grad():
        model.model.norm.weight.mul_(1.5)   # a different model, so its answers differ
    model.save_pretrained(root / "full" / "checkpoint-5")
    dora = get_peft_model(load_model(demo_model_dir, dtype=torch.float32),
                          LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], use_dora=True))
    with torch.no_grad():
        for name, param in dora.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=torch.Generator().manual_seed(7)) * 0.08)
    dora.save_pretrained(root / "dora" / "checkpoint-7")
    (root / "dora" / "checkpoint-7" / "COMPLETE").write_text("ok\n")
    full = target_for_folder(str(demo_model_dir), root / "full" / "checkpoint-5")
    return list(targets), full, target_for_folder(str(demo_model_dir), root / "dora" / "checkpoint-7")


def _one_at_a_time(engine, targets, histories, prompt, settings):
    return [engine.answer(t, prompt, settings, history=h).text for t, h in zip(targets, histories)]


@pytest.mark.parametrize("repetition_penalty", [1.0, 1.3])
def test_five_columns_together_equal_one_at_a_time(columns, repetition_penalty):
    lora_targets, full, _ = columns
    targets = [*lora_targets, full]                      # base, ckpt-10, -20, -30, full
    settings = GenerationSettings(greedy=True, max_new_tokens=TOKENS, repetition_penalty=repetition_penalty)
    engine = ChatEngine()
    expected = _one_at_a_time(engine, targets, HISTORIES, DEMO_PROMPTS[0][0], settings)
    assert len(set(expected)) >= 4, expected             # the adapters differ, so equality means something
    replies = [Reply() for _ in targets]
    snapshots = list(engine.stream_together(targets, HISTORIES, DEMO_PROMPTS[0][0], settings, replies=replies))
    assert snapshots[-1] == expected and [r.text for r in replies] == expected
    singles = [engine.answer(t, DEMO_PROMPTS[0][0], settings, history=h) for t, h in zip(targets, HISTORIES)]
    assert [r.new_tokens for r in replies] == [r.new_tokens for r in singles]
    assert [r.finish for r in replies] == [r.finish for r in singles]
    # Side by side: one after another, at most one column is ever part-way through its answer. All four
    # LoRA-or-base columns share one batch; under a repetition penalty only equal-length prompts do (0 and 2).
    part_way = [sum(0 < len(s[i]) < len(expected[i]) for i in range(len(targets))) for s in snapshots]
    assert max(part_way) >= (4 if repetition_penalty == 1.0 else 2), part_way


def test_dora_column_answers_apart_and_the_same(columns):
    lora_targets, _, dora = columns
    targets = [lora_targets[0], dora, lora_targets[1]]
    histories = [[], [], HISTORIES[1]]
    settings = GenerationSettings(greedy=True, max_new_tokens=TOKENS)
    engine = ChatEngine()
    expected = _one_at_a_time(engine, targets, histories, DEMO_PROMPTS[3][0], settings)
    assert list(engine.stream_together(targets, histories, DEMO_PROMPTS[3][0], settings))[-1] == expected


def test_stop_ends_every_column_and_a_missing_model_fails_alone(columns, tmp_path):
    import threading

    from backend.chat.targets import ChatTarget

    lora_targets, _, _ = columns
    gone = ChatTarget(model=str(tmp_path / "no-such-model"))
    targets = [lora_targets[0], gone, lora_targets[1]]
    settings = GenerationSettings(greedy=True, max_new_tokens=200)
    stop, replies = threading.Event(), [Reply() for _ in targets]
    for snapshot in ChatEngine().stream_together(targets, [[], [], []], "Tell me a long story.", settings,
                                                 stop=stop, replies=replies):
        if any(snapshot):
            stop.set()
    assert replies[1].finish == "error" and "does not exist" in replies[1].error
    assert [replies[0].finish, replies[2].finish] == ["stopped", "stopped"]
    assert 0 < replies[0].new_tokens < 200
