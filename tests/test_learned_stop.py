"""The learned stop (backend/training/learned_stop.py), driven in this process with the Trainer's own
state objects and the real tiny demo model under a fresh LoRA adapter, which knows none of the demo
rows: a check far from its goal asks one batch and stops asking, writes its line, and leaves the run
going; a check that fails turns the stop off and leaves the run going too. What a trained run's
check counts is recounted independently in tests/test_learning_report.py."""

from __future__ import annotations

import json

from transformers import TrainerControl, TrainerState

from backend.config_recipes import tiny_config
from backend.runs.files import read_status
from backend.training.cli import Job
from backend.training.learned_stop import PROBE_BATCH, PROBE_ROWS, LearnedStop


def _stop(workspace, lora_demo):
    run_dir = workspace.runs_dir / "r"
    run_dir.mkdir()
    config = tiny_config(stop_when_learned=True)
    config.save(run_dir / "config.yaml")
    model, tokenizer, _ = lora_demo
    return LearnedStop(Job(config, run_dir, workspace), tokenizer), model, run_dir


def test_a_check_far_from_its_goal_asks_one_batch_and_the_run_goes_on(workspace, lora_demo):
    stop, model, run_dir = _stop(workspace, lora_demo)
    state, control = TrainerState(global_step=0, max_steps=100, epoch=0.0), TrainerControl()
    stop.on_train_begin(None, state, control)
    assert len(stop.items) == PROBE_ROWS and len(stop.limits) == PROBE_ROWS // PROBE_BATCH
    state.global_step, state.epoch = 10, 1.0
    stop.on_epoch_end(None, state, control, model=model)
    assert stop.checks == []  # no check in the first epoch
    state.global_step, state.epoch = 20, 2.0
    model.train()
    stop.on_epoch_end(None, state, control, model=model)
    assert model.training and not control.should_training_stop and stop.stopped_at is None
    [check] = stop.checks
    assert check["asked"] == PROBE_BATCH and check["right"] < PROBE_BATCH and not check["learned"]
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["learned_check"] and lines[0]["step"] == 20
    assert stop.summary()["checks"] == [check]
    assert read_status(run_dir).get("stage") is None  # the check's count is shown while it answers, then cleared


def test_a_check_that_fails_turns_the_stop_off_and_the_run_goes_on(workspace, lora_demo):
    stop, model, run_dir = _stop(workspace, lora_demo)
    state, control = TrainerState(global_step=20, max_steps=100, epoch=2.0), TrainerControl()
    stop.on_train_begin(None, state, control)
    stop.limits = [0] * len(stop.limits)  # generate() refuses max_new_tokens=0
    stop.on_epoch_end(None, state, control, model=model)
    assert stop.off and not control.should_training_stop and stop.checks == []
