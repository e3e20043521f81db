"""The worker's learning report callback (backend/training/learning_callback.py), driven in this
process with the Trainer's own state objects and the real tiny demo model under a LoRA adapter:
the base with the adapter off, the budget that leaves a checkpoint out with the command that
scores it, a stopped run's last checkpoint, and a model too slow for the budget."""

from __future__ import annotations

import time

import pytest
from transformers import TrainerControl, TrainerState

from backend.config_recipes import tiny_config
from backend.learning.entries import load_report
from backend.training.cli import Job
from backend.training.learning_callback import LearningReport


def _callback(workspace, lora_demo, name="r"):
    run_dir = workspace.runs_dir / name
    run_dir.mkdir()
    config = tiny_config()
    config.save(run_dir / "config.yaml")
    model, tokenizer, path = lora_demo
    return LearningReport(Job(config, run_dir, workspace), tokenizer, path), model, run_dir


def test_the_base_then_a_checkpoint_over_the_budget_then_final(workspace, lora_demo):
    callback, model, run_dir = _callback(workspace, lora_demo)
    state, control = TrainerState(global_step=0, max_steps=30), TrainerControl()
    model.train()
    callback.on_train_begin(None, state, control, model=model)
    assert model.training  # back in training mode after answering
    assert [e["checkpoint"] for e in load_report(run_dir)["checkpoints"]] == ["base"]
    state.global_step = 10  # almost no training time has passed: scoring it would go past 10% of it
    callback.on_save(None, state, control, model=model)
    report = load_report(run_dir)
    assert [s["checkpoint"] for s in report["skipped"]] == ["checkpoint-10"]
    assert "--learning" in report["skipped"][0]["reason"]
    callback.final(model, 30)
    assert [e["checkpoint"] for e in load_report(run_dir)["checkpoints"]] == ["base", "final"]


def test_final_at_a_scored_checkpoints_step_is_that_entry_not_answered_again(workspace, lora_demo):
    """The learned stop ends a run at an epoch's last step, just after that step's save was scored:
    final/ holds the same weights, so its entry is the checkpoint's, named final."""
    callback, model, run_dir = _callback(workspace, lora_demo)
    state = TrainerState(global_step=0, max_steps=30)
    callback.on_train_begin(None, state, TrainerControl(), model=model)
    callback.started = time.monotonic() - 1000  # well within the budget
    state.global_step = 10
    callback.on_save(None, state, TrainerControl(), model=model)
    callback.final(model, 10)
    report = load_report(run_dir)
    assert [e["checkpoint"] for e in report["checkpoints"]] == ["base", "checkpoint-10", "final"]
    scored, final = report["checkpoints"][1], report["checkpoints"][2]
    assert final["same_as"] == "checkpoint-10" and final["step"] == 10 and final["generated"] == 0
    for key in ("learned", "kept", "ended", "rouge_l", "examples"):
        assert final[key] == scored[key]


def test_a_stopped_run_gets_its_last_checkpoint_scored(workspace, lora_demo):
    callback, model, run_dir = _callback(workspace, lora_demo)
    state, control = TrainerState(global_step=0, max_steps=30), TrainerControl()
    callback.on_train_begin(None, state, control, model=model)
    state.global_step, control.should_training_stop = 7, True
    callback.on_save(None, state, control, model=model)  # the stop's save: left to the end
    (run_dir / "checkpoint-7").mkdir()
    callback.stopped_checkpoint(model, 7)
    assert [e["checkpoint"] for e in load_report(run_dir)["checkpoints"]] == ["base", "checkpoint-7"]


def test_a_model_too_slow_for_the_budget_is_skipped_with_a_sentence(workspace, lora_demo):
    callback, model, run_dir = _callback(workspace, lora_demo)
    state = TrainerState(global_step=0, max_steps=30)
    callback.on_train_begin(None, state, TrainerControl(), model=model)
    callback.started = time.monotonic() - 1000  # a thousand seconds of training ...
    callback.per_answer = 60.0  # ... and a minute an answer: a quarter of it holds fewer than MIN_PROMPTS
    callback.final(model, 30)
    report = load_report(run_dir)
    assert [e["checkpoint"] for e in report["checkpoints"]] == ["base"]
    assert "too slow" in report["skipped"][0]["reason"] and report["skipped"][0]["checkpoint"] == "final"
    callback.per_answer = 1000 * 0.25 / 9  # nine answers fit in a quarter of the thousand seconds
    callback.final(model, 30)
    final = load_report(run_dir)["checkpoints"][-1]
    assert final["checkpoint"] == "final" and final["generated"] <= 9
    assert load_report(run_dir)["skipped"] == []


def test_the_bases_cached_answers_serve_every_limit(workspace, lora_demo):
    """Cached once at MAX_NEW_TOKENS, a base answer cut to a run's limit is what generating at that
    limit gives: the same text, ended only when the stop token came within it."""
    from backend.learning.entries import MAX_NEW_TOKENS, BaseAnswers, base_cache_path
    from backend.models.greedy import greedy_finished

    model, tokenizer, path = lora_demo
    model.eval()
    cache = base_cache_path(path, tokenizer, workspace.datasets_dir)
    questions = ["What is the capital of France?", "法国的首都是哪里？"]
    BaseAnswers(cache, tokenizer).generate(model, questions)
    again = BaseAnswers(cache, tokenizer)  # read back from the file
    assert again.missing(questions) == []
    for limit in (4, 48, MAX_NEW_TOKENS):
        direct = greedy_finished(model, tokenizer, [[{"role": "user", "content": q}] for q in questions], limit)
        for question, (ids, ended) in zip(questions, direct):
            assert again.answer(question, limit) == (tokenizer.decode(ids, skip_special_tokens=True).strip(), ended)


def test_a_second_run_on_the_same_data_scores_its_base_from_the_cache(workspace, lora_demo):
    """The base's answers to the data's prompts are cached by their messages: the first run
    generates them, a second run of the same data and model (a sweep, a rerun) generates none and
    gets the same entry."""
    first, model, _ = _callback(workspace, lora_demo, "first")
    first.on_train_begin(None, TrainerState(global_step=0, max_steps=30), TrainerControl(), model=model)
    second, _, run_dir = _callback(workspace, lora_demo, "second")
    second.on_train_begin(None, TrainerState(global_step=0, max_steps=30), TrainerControl(), model=model)
    one, two = (load_report(workspace.runs_dir / name)["checkpoints"][0] for name in ("first", "second"))
    assert one["generated"] == len(first._reporter().prompts.learned) + one["kept"]["of"] > 0
    assert two["generated"] == 0
    assert [(e["answer"], e["ended"]) for e in two["examples"]] == [(e["answer"], e["ended"]) for e in one["examples"]]
    assert two["learned"] == one["learned"] and two["right_questions"] == one["right_questions"]


def test_a_report_that_cannot_be_set_up_never_stops_the_run(workspace, lora_demo):
    callback, model, run_dir = _callback(workspace, lora_demo)
    (run_dir / "config.yaml").unlink()
    callback.job.config = callback.job.config.__class__(**{**vars(callback.job.config), "dataset": "gone.jsonl"})
    state = TrainerState(global_step=0, max_steps=30)
    callback.on_train_begin(None, state, TrainerControl(), model=model)  # the data is not found: no report
    callback.on_save(None, state, TrainerControl(), model=model)
    callback.final(model, 30)
    assert not (run_dir / "eval" / "learning.json").exists()


@pytest.mark.parametrize("learned_stop", [False, True])
def test_with_the_learned_stop_the_budget_counts_the_time_trained_not_the_ceiling(workspace, lora_demo,
                                                                                 learned_stop):
    """A third of the ceiling trained, a checkpoint that fits 10% of the projected run but not of the
    time so far: scored without the learned stop, left out with it (the run may end at its next check)."""
    callback, model, run_dir = _callback(workspace, lora_demo, f"stop-{learned_stop}")
    callback.job.config.stop_when_learned = learned_stop
    state, control = TrainerState(global_step=0, max_steps=30), TrainerControl()
    callback.on_train_begin(None, state, control, model=model)
    one = callback.per_answer * callback._reporter().full_count
    callback.started = time.monotonic() - 10 * one  # 10 steps took ten scorings' time: 30 steps, thirty
    state.global_step = 10
    callback.on_save(None, state, control, model=model)
    report = load_report(run_dir)
    assert ("checkpoint-10" in [s["checkpoint"] for s in report["skipped"]]) == learned_stop
    assert ("checkpoint-10" in [e["checkpoint"] for e in report["checkpoints"]]) == (not learned_stop)
