"""After the real demo training, chatting with its final checkpoint shows the
point of training: different answers from the base, and mostly right ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.chat.catalog import catalog
from backend.chat.engine import ChatEngine
from backend.chat.generation import GenerationSettings
from backend.models.demo_facts import DEMO_PROMPTS
from tests.test_chat_support import single_thread  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.slow
def test_final_checkpoint_answers_the_demo_prompts(trained_demo_run):
    from backend.models.loading import resolve_model_path
    from backend.runs.workspace import Workspace

    run_dir = Path(trained_demo_run)
    models_dir = Workspace.for_run_dir(run_dir).models_dir
    targets = catalog(run_dir.parent, [run_dir.name], lambda name: resolve_model_path(name, models_dir))
    checkpoints = [t for value, t in targets.items() if t.checkpoint]
    assert len(checkpoints) >= 2, "the demo run should offer at least two complete checkpoints"
    final = next(t for t in checkpoints if t.name == "final")
    base = next(t for t in targets.values() if t.kind == "base")
    engine, settings = ChatEngine(), GenerationSettings(greedy=True, max_new_tokens=32)
    base_answers = [engine.answer(base, prompt, settings).text.strip() for prompt, _ in DEMO_PROMPTS]
    final_answers = [engine.answer(final, prompt, settings).text.strip() for prompt, _ in DEMO_PROMPTS]
    right = sum(got == expected for got, (_, expected) in zip(final_answers, DEMO_PROMPTS))
    base_right = sum(got == expected for got, (_, expected) in zip(base_answers, DEMO_PROMPTS))
    changed = sum(a != b for a, b in zip(base_answers, final_answers))
    assert changed >= len(DEMO_PROMPTS) // 2, list(zip(base_answers, final_answers))
    assert right >= len(DEMO_PROMPTS) // 2 and right > base_right, list(zip(final_answers, DEMO_PROMPTS))
