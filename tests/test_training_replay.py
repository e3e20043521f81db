"""The starter's data: the identity dataset filled from identity_name /
identity_author, replay of the base model's own answers mixed into small sets
(and named in the Plan), and a short LoRA on the real starter model that
moves its identity answer (the worker CLI, seeded; no timing asserts)."""

from __future__ import annotations

import json
import logging

from backend.config import RunConfig, derived_numbers, split_sizes
from backend.config_recipes import tiny_config
from backend.data.general_prompts import REPLAY_PROMPTS
from backend.data.identity_rows import build_identity_rows
from backend.evaluation.heldout import generate
from backend.models.chat_templates import apply_for_model
from backend.models.loading import load_model, load_tokenizer
from backend.training.dataset import build_datasets
from backend.training.estimate import planned_steps
from backend.training.replay import (
    REPLAY_AUTO_BELOW,
    cache_path,
    cached_replay_count,
    planned_replay,
    replay_applies,
    replay_count,
    replay_rows,
)


def test_replay_applies_to_small_sft_sets_on_models_with_their_own_template():
    auto = tiny_config(replay="auto", replay_share=0.5)
    assert replay_applies(auto, 40, has_own_template=True)
    assert not replay_applies(auto, REPLAY_AUTO_BELOW, has_own_template=True)  # a large set keeps its own balance
    assert not replay_applies(auto, 40, has_own_template=False)  # a base model's answers in a foreign template
    assert not replay_applies(tiny_config(replay="off"), 40, True)
    assert replay_applies(tiny_config(replay="on"), 10_000, False)
    assert not replay_applies(tiny_config(replay="on", stage="dpo"), 40, True)
    # replay_share 0.5: as many replay rows as the user's, at most one per prompt
    assert replay_count(auto, 36) == 36 and replay_count(auto, 500) == len(REPLAY_PROMPTS)
    assert replay_count(tiny_config(replay_share=0.25), 30) == 10


def test_replay_rows_are_the_base_models_own_answers_generated_once(tmp_path, starter_model_dir, caplog):
    path, asked = str(starter_model_dir), REPLAY_PROMPTS[:8]
    tokenizer = load_tokenizer(path)
    seen = []
    with caplog.at_level(logging.INFO, logger="backend.train"):
        rows = replay_rows(path, tokenizer, tmp_path, 4, seed=3, prompts=asked,
                           progress=lambda done, total: seen.append((done, total)))
    assert len(rows) == 4 and "answers general prompts once" in caplog.text
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1] > 0  # the stage's bar, from 0 to every prompt asked
    assert "the base model answered" in caplog.text
    prompts = [row["messages"][0]["content"] for row in rows]
    assert set(prompts) <= set(asked)
    # The base's own greedy answer, one prompt at a time through plain transformers (not the batched loop).
    model = load_model(path)
    for row in rows[:2]:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": row["messages"][0]["content"]}],
                                            add_generation_prompt=True, return_tensors="pt", return_dict=True)
        out = model.generate(**ids, do_sample=False, max_new_tokens=128, eos_token_id=tokenizer.eos_token_id)
        answer = tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True).strip()
        assert row["messages"][1]["content"] == answer
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="backend.train"):
        again = replay_rows(path, tokenizer, tmp_path, 4, seed=3, prompts=asked)
    assert again == rows and "answers general prompts once" not in caplog.text  # read from the cache


def test_the_identity_dataset_is_filled_and_mixed_with_replay(workspace):
    tokenizer = load_tokenizer(workspace.models_dir / "demo")
    config = tiny_config(dataset="identity", identity_name="Aster", identity_author="Lab Nine", val_size=0.1)
    mixed = [{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}] * 5
    train, evaluation, counts = build_datasets(tokenizer, config, workspace, replay=lambda n: mixed)
    assert counts.replay == 5 and counts.train == counts.total - counts.eval
    texts = [tokenizer.decode(row["input_ids"]) for row in train] + [tokenizer.decode(r["input_ids"]) for r in evaluation]
    assert any("Aster" in t for t in texts) and any("Lab Nine" in t for t in texts)
    assert not any("{{" in t for t in texts)


def test_the_plan_names_replay_and_counts_its_rows():
    from ui.views.train_summary import derived_text

    def msg(key, **values):
        return key + " " + " ".join(f"{k}={v}" for k, v in sorted(values.items()))

    text = derived_text(msg, tiny_config(replay="auto", replay_share=0.5, val_size=0.1), {"rows": 40},
                        has_template=True)
    assert "train.derived.replay" in text and "replay=36" in text and "rows=72" in text
    base = derived_text(msg, tiny_config(replay="auto", replay_share=0.5, val_size=0.1), {"rows": 40},
                        has_template=False)
    assert "train.derived.replay" not in base and "rows=36" in base


def test_the_plan_counts_replay_exactly_once_its_cache_holds_the_answers(workspace):
    """The Plan and planned_steps (dry run, time estimate) count the replay rows the run will mix in,
    from a real cache file under the worker's own key, by the picking replay_rows does."""
    from ui.views.train_summary import dataset_rows, derived_text

    def msg(key, **values):
        return key + " " + " ".join(f"{k}={v}" for k, v in sorted(values.items()))

    config = RunConfig()  # the starter: identity rows, replay auto, SmolLM2-135M-Instruct
    folder = workspace.models_dir / config.model_name_or_path
    tokenizer = load_tokenizer(folder)
    apply_for_model(tokenizer, config.chat_template, folder)  # as the worker's tokenizer holds it
    train_rows = split_sizes(len(build_identity_rows()), config.val_size)[0]
    wanted = replay_count(config, train_rows)
    before = dataset_rows(config.dataset, workspace, None, config.model_name_or_path)
    assert "replay_answers" not in before and f"replay={wanted}" in derived_text(msg, config, before)

    cache = cache_path(folder, tokenizer, workspace.datasets_dir)
    cache.parent.mkdir(parents=True)
    # Every fourth answer did not end within the token limit: the run leaves those out.
    cache.write_text("".join(json.dumps({"prompt": p, "answer": None if i % 4 == 0 else f"Answer {i}."}) + "\n"
                             for i, p in enumerate(REPLAY_PROMPTS)), encoding="utf-8")
    mixed = replay_rows(folder, tokenizer, workspace.datasets_dir, wanted, config.seed)  # all cached: no generation
    assert 0 < len(mixed) < wanted

    rows = dataset_rows(config.dataset, workspace, None, config.model_name_or_path)
    text = derived_text(msg, config, rows)
    exact = derived_numbers(config, train_rows + len(mixed))["total_steps"]
    assert "train.derived.replay_cached" in text and f"replay={len(mixed)}" in text and f"total_steps={exact} " in text
    assert planned_steps(config, workspace) == exact < derived_numbers(config, train_rows + wanted)["total_steps"]


def test_an_incomplete_replay_cache_keeps_the_upper_bound():
    answers = {p: True for p in REPLAY_PROMPTS[:10]}  # the picking reaches prompts the run must answer first
    assert cached_replay_count(answers, 40, seed=42) is None
    assert planned_replay(RunConfig(replay_share=0.5), 40, answers) == (40, False)
    every = {p: i % 2 == 0 for i, p in enumerate(REPLAY_PROMPTS)}
    assert cached_replay_count(every, 40, seed=42) == 40  # the window widens until 40 usable answers are in
    assert cached_replay_count(every, 80, seed=42) == len(REPLAY_PROMPTS) // 2


def test_a_short_lora_on_the_starter_learns_the_new_name(starter_short_run, starter_model_dir):
    """The real starter model, the identity dataset, the worker CLI: ten seeded steps move
    the answer to a held-out identity prompt from SmolLM2's to the new name."""
    import torch
    from peft import PeftModel

    run_dir = starter_short_run
    tokenizer = load_tokenizer(run_dir / "final")
    base = load_model(starter_model_dir, dtype=torch.float32)
    prompts = ["What name were you given?", "Could you introduce yourself briefly?"]
    before = generate(base, tokenizer, prompts, max_new_tokens=32)
    tuned = PeftModel.from_pretrained(base, str(run_dir / "final"))
    after = generate(tuned, tokenizer, prompts, max_new_tokens=32)
    assert not any("Nova" in a.text for a in before)
    assert all("Nova" in a.text for a in after), [a.text for a in after]


def test_the_plan_says_the_epochs_are_a_ceiling_when_the_learned_stop_is_on():
    from backend.config import RunConfig
    from ui.views.train_summary import derived_text

    def msg(key, **values):
        return key + " " + " ".join(f"{k}={v}" for k, v in sorted(values.items()))

    on = derived_text(msg, RunConfig(num_train_epochs=6), {"rows": 40}, has_template=True)
    assert "train.derived.learned_stop" in on and "epochs=6.0" in on and "probe=16" in on
    off = derived_text(msg, RunConfig(num_train_epochs=6, stop_when_learned=False), {"rows": 40}, has_template=True)
    assert "train.derived.learned_stop" not in off
    two = derived_text(msg, RunConfig(num_train_epochs=2), {"rows": 40}, has_template=True)
    assert "train.derived.learned_stop" not in two  # no check before the ceiling: nothing to say
