"""The chat engine against the plain way of doing the same thing: peft's
PeftModel.from_pretrained and the model's own generate, on the demo model."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
import torch

from backend.chat.engine import ChatEngine, device_notice
from backend.chat.generation import GenerationSettings, Reply, build_messages, build_prompt
from backend.chat.targets import ChatTarget, TargetError, run_choices, target_for_folder
from backend.models.demo_facts import DEMO_PROMPTS
from backend.models.loading import load_model, load_tokenizer
from tests.test_chat_support import chat_lora_run, plain_greedy, single_thread  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

PROMPTS = [DEMO_PROMPTS[0][0], DEMO_PROMPTS[3][0]]   # one English, one Chinese
TOKENS = 20
GREEDY = GenerationSettings(greedy=True, max_new_tokens=TOKENS)


@pytest.fixture(scope="module")
def lora_run(chat_lora_run):  # noqa: F811 (the imported fixture)
    return chat_lora_run


@pytest.fixture(scope="module")
def choices(lora_run):
    return run_choices(lora_run, resolve_model=str)


@pytest.fixture(scope="module")
def engine():
    return ChatEngine()


def _references(model_dir, checkpoint=None) -> list[str]:
    from peft import PeftModel

    model = load_model(model_dir, dtype=torch.float32)
    if checkpoint:
        model = PeftModel.from_pretrained(model, checkpoint)
    tokenizer = load_tokenizer(model_dir)
    return [plain_greedy(model.eval(), tokenizer, [{"role": "user", "content": p}], TOKENS) for p in PROMPTS]


def test_incomplete_checkpoint_is_not_offered(choices, lora_run):
    names = [t.name for t in choices.targets]
    assert names == ["base", "checkpoint-10", "checkpoint-20"]       # checkpoint-30 has no COMPLETE
    assert [t.kind for t in choices.targets] == ["base", "lora", "lora"]
    assert [t.step for t in choices.targets[1:]] == [10, 20]
    assert [t.eval_loss for t in choices.targets[1:]] == [2.0, 1.0]  # from each trainer_state.json
    with pytest.raises(TargetError, match="COMPLETE"):
        target_for_folder(choices.model, lora_run / "checkpoint-30")


def test_answers_equal_plain_peft_and_base_and_survive_switching(engine, choices, demo_model_dir):
    base, first, second = choices.targets
    expected = {t.name: _references(demo_model_dir, t.checkpoint) for t in (base, first, second)}
    # The adapters really change the answers, so equality below means something.
    assert expected["checkpoint-10"] != expected["base"] and expected["checkpoint-20"] != expected["checkpoint-10"]
    # Back and forth: base, 10, 20, 10, base, 20 - one base in memory throughout.
    for target in (base, first, second, first, base, second):
        got = [engine.answer(target, prompt, GREEDY).text for prompt in PROMPTS]
        assert got == expected[target.name], target.name
    assert len(engine._bases) == 1 and not engine._full
    (loaded,) = engine._bases.values()
    assert sorted(loaded.adapters) == sorted([first.checkpoint, second.checkpoint])


def test_multi_turn_history_goes_through_the_template(engine, choices, demo_model_dir):
    base = choices.targets[0]
    history = [{"role": "user", "content": PROMPTS[0]}, {"role": "assistant", "content": "Paris."}]
    settings = GenerationSettings(greedy=True, max_new_tokens=TOKENS, system_prompt="Answer in one sentence.")
    got = engine.answer(base, PROMPTS[1], settings, history=history).text
    model, tokenizer = load_model(demo_model_dir, dtype=torch.float32).eval(), load_tokenizer(demo_model_dir)
    assert got == plain_greedy(model, tokenizer, build_messages(settings.system_prompt, history, PROMPTS[1]), TOKENS)


def test_seeded_sampling_repeats(engine, choices):
    target = choices.targets[1]
    settings = GenerationSettings(greedy=False, temperature=1.5, top_p=1.0, top_k=0, max_new_tokens=TOKENS, seed=7)
    first, again = (engine.answer(target, PROMPTS[0], settings).text for _ in range(2))
    assert first == again


def test_stop_cancels_generation(engine, choices):
    stop = threading.Event()
    stop.set()   # pressed before the first token: generation ends after one token
    reply = None
    for target in choices.targets:

        reply = Reply()
        list(engine.stream(target, [], PROMPTS[0], GenerationSettings(max_new_tokens=50), stop=stop, reply=reply))
        assert reply.finish == "stopped" and reply.new_tokens == 1, target.name


def test_prompt_is_cut_to_the_context_with_a_notice(engine, choices, demo_model_dir):
    tokenizer = load_tokenizer(demo_model_dir)
    long_text = "What colour is the sky? " * 300
    prompt = build_prompt(tokenizer, build_messages("", [], long_text), context_length=512, max_new_tokens=64)
    assert prompt.input_ids.shape[1] <= 512 - 64
    assert any("Prompt cut to fit the context" in str(n) for n in prompt.notices)
    # The generation prompt survives the cut: the model still answers as the assistant.
    assert tokenizer.decode(prompt.input_ids[0]).endswith("<|im_start|>assistant\n")
    # Old turns go first: a long history is dropped before the new question is cut.
    history = [{"role": "user", "content": long_text}, {"role": "assistant", "content": "Blue."}]
    prompt = build_prompt(tokenizer, build_messages("", history, "What is 2 plus 3?"), 512, 64)
    assert "What is 2 plus 3?" in tokenizer.decode(prompt.input_ids[0]) and "dropped 1 earlier" in str(prompt.notices[0])
    # Through the engine the notice reaches the reply, and max new tokens is capped.
    reply, stop = Reply(), threading.Event()
    stop.set()   # one token is enough to see the notices
    list(engine.stream(choices.targets[0], [], long_text, GenerationSettings(max_new_tokens=100_000), stop=stop,
                       reply=reply))
    assert any("Max new tokens lowered" in str(n) for n in reply.notices)
    assert any("Prompt cut" in str(n) for n in reply.notices)


def test_full_checkpoint_loads_as_its_own_model(demo_model_dir, tmp_path):
    model = load_model(demo_model_dir, dtype=torch.float32)
    with torch.no_grad():
        model.model.norm.weight.mul_(1.5)   # a different model, so its answers differ
    folder = tmp_path / "checkpoint-5"
    model.save_pretrained(folder)
    engine = ChatEngine()
    target = target_for_folder(str(demo_model_dir), folder)
    assert target.kind == "full"
    plan = engine.plan([ChatTarget(model=str(demo_model_dir)), target], "cpu")
    assert any("full fine-tuned" in line and "MiB" in line for line in plan)
    tokenizer = load_tokenizer(demo_model_dir)
    expected = plain_greedy(model.eval(), tokenizer, [{"role": "user", "content": PROMPTS[0]}], TOKENS)
    assert engine.answer(target, PROMPTS[0], GREEDY).text == expected
    assert len(engine._full) == 1 and not engine._bases


def test_unload_frees_the_models(demo_model_dir):
    engine = ChatEngine()
    target = ChatTarget(model=str(demo_model_dir))
    engine.prepare([target], "cpu")
    model_ref = weakref.ref(next(iter(engine._bases.values())).model)
    report = engine.unload("cpu")
    gc.collect()
    assert model_ref() is None, "something still holds the unloaded model"
    assert report["models"] == 1 and report["after"]["rss_mib"] > 0 and engine.loaded() == []


def test_busy_device_notice():
    assert device_notice("cpu", {"cuda:0": "run-1"}) is None
    assert device_notice("cpu", {"cpu": "run-1"}) is None        # slower, never refused
    text = str(device_notice("cuda:0", {"cuda:0": "run-1"}))
    assert "run-1" in text and "CPU" in text and "wait" in text
