"""A grpo run whose groups of completions all score alike trains nothing, and says so: the worker's
GroupSignalCheck on the Trainer's own state and control objects, fed the lines TRL logs, and what
train.log, status.json and the Runs tab then hold (in English and Chinese)."""

from __future__ import annotations

import logging

from transformers import TrainerControl, TrainerState, TrainingArguments

from backend.config_recipes import tiny_config
from backend.runs.files import read_status, update_status
from backend.runs.info import InfoReader
from backend.training.grpo_signal import NO_SIGNAL_STEPS, GroupSignalCheck
from ui.i18n import merge_texts
from ui.tabs import runs
from ui.views import run_view


def _step(check, args, state, step: int, alike: float, reward: float = 0.0) -> None:
    """One optimizer step as the Trainer reports it: global_step moves, then TRL's logged numbers arrive."""
    state.global_step = step
    logs = {"loss": 0.0, "grad_norm": 0.0 if alike == 1.0 else 0.4, "reward": reward, "reward_std": 0.0,
            "frac_reward_zero_std": alike}
    check.on_log(args, state, TrainerControl(), logs=logs)


def _run_dir(tmp_path):
    run_dir = tmp_path / "20260101-000000-grpo"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(tiny_config().with_overrides(["stage=grpo"]).to_yaml(), encoding="utf-8")
    update_status(run_dir, state="running")
    return run_dir


def test_steps_whose_groups_all_score_alike_are_said_in_train_log_and_status(tmp_path, caplog):
    run_dir = _run_dir(tmp_path)
    args, state = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[]), TrainerState()
    check = GroupSignalCheck(run_dir, num_generations=8)
    check.on_train_begin(args, state, TrainerControl())
    with caplog.at_level(logging.WARNING, logger="backend.train"):
        for step in range(1, NO_SIGNAL_STEPS):
            _step(check, args, state, step, 1.0)
        assert "train_warning" not in read_status(run_dir) and not caplog.records  # not yet "several" steps
        _step(check, args, state, NO_SIGNAL_STEPS, 1.0)
        for step in range(NO_SIGNAL_STEPS + 1, 9):
            _step(check, args, state, step, 1.0)
    assert len(caplog.records) == 1  # said once, not every step after
    line = caplog.records[0].getMessage()
    assert line.startswith(f"steps 1-{NO_SIGNAL_STEPS}: every group of 8 completions scored alike (mean reward 0.0)")
    assert "rouge_l" in line and "num_generations" in line  # what to change
    saved = read_status(run_dir)["train_warning"]
    assert saved["id"] == "train.grpo_no_signal" and saved["args"]["last"] == NO_SIGNAL_STEPS

    # The run ends "completed": the Runs tab still shows what it found, in the user's language.
    update_status(run_dir, state="completed")
    info = InfoReader().read(run_dir, read_status(run_dir))
    texts = merge_texts(runs.TEXT)
    english = run_view.alert_text(lambda k, **v: texts[k]["en"].format(**v), info, "en")
    chinese = run_view.alert_text(lambda k, **v: texts[k]["zh"].format(**v), info, "zh")
    assert english == f"⚠ {line}"
    assert chinese.startswith(f"⚠ 第 1-{NO_SIGNAL_STEPS} 步：每组 8 个回答得分都相同") and "rouge_l" in chinese


def test_a_step_whose_groups_differ_starts_the_count_again(tmp_path, caplog):
    run_dir = _run_dir(tmp_path)
    args, state = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[]), TrainerState()
    check = GroupSignalCheck(run_dir, num_generations=4)
    check.on_train_begin(args, state, TrainerControl())
    pattern = [1.0] * (NO_SIGNAL_STEPS - 1) + [0.5] + [1.0] * (NO_SIGNAL_STEPS - 1) + [0.0]
    with caplog.at_level(logging.WARNING, logger="backend.train"):
        for step, alike in enumerate(pattern, 1):
            _step(check, args, state, step, alike, reward=0.3)
    assert not caplog.records and "train_warning" not in read_status(run_dir)
    update_status(run_dir, state="completed")
    assert run_view.alert_text(lambda k, **v: k, InfoReader().read(run_dir, read_status(run_dir))) == ""


def test_a_run_that_finds_its_spread_after_the_warning_withdraws_it(tmp_path, caplog):
    """The documented quick command's steps as one run logged them (frac_reward_zero_std 1 or 0 for steps
    1-24): alike at 1 and 3-7, then apart at 8, 11, 12, 14, 15 and most steps after, its reward up to 0.35.
    The warning at step 7 is withdrawn at step 15; a streak after that would warn again."""
    run_dir = _run_dir(tmp_path)
    args, state = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[]), TrainerState()
    check = GroupSignalCheck(run_dir, num_generations=8)
    check.on_train_begin(args, state, TrainerControl())
    alike_steps = {1, 3, 4, 5, 6, 7, 9, 10, 13, 16, 17, 21}
    with caplog.at_level(logging.INFO, logger="backend.train"):
        for step in range(1, 15):
            _step(check, args, state, step, 1.0 if step in alike_steps else 0.0, reward=0.1)
        assert read_status(run_dir)["train_warning"]["args"] == {"first": 3, "last": 7, "generations": 8,
                                                                  "reward": 0.1}
        _step(check, args, state, 15, 0.0, reward=0.05)  # the fifth step with a spread since the warning
        assert read_status(run_dir)["train_warning"] is None
        for step in range(16, 25):
            _step(check, args, state, step, 1.0 if step in alike_steps else 0.0, reward=0.2)
    assert read_status(run_dir)["train_warning"] is None
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and said[1] == ("by step 15, 5 steps since the warning had groups that scored apart (mean "
                                          "reward now 0.05): the run learns after all, and the warning about steps "
                                          "3-7 is withdrawn.")
    update_status(run_dir, state="completed")
    assert run_view.alert_text(lambda k, **v: k, InfoReader().read(run_dir, read_status(run_dir))) == ""
    for step in range(25, 25 + NO_SIGNAL_STEPS):  # dead again: a new warning
        _step(check, args, state, step, 1.0)
    assert read_status(run_dir)["train_warning"]["args"]["first"] == 25


def test_logging_every_few_steps_counts_the_steps_each_line_covers(tmp_path, caplog):
    """logging_steps 2: TRL averages frac_reward_zero_std over the two steps; 1.0 means both were alike."""
    run_dir = _run_dir(tmp_path)
    args, state = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[]), TrainerState()
    check = GroupSignalCheck(run_dir, num_generations=8)
    state.global_step = 10  # resumed from checkpoint-10
    check.on_train_begin(args, state, TrainerControl())
    with caplog.at_level(logging.WARNING, logger="backend.train"):
        _step(check, args, state, 12, 1.0)
        _step(check, args, state, 14, 1.0)
        assert not caplog.records  # steps 11-14: four
        _step(check, args, state, 16, 1.0)
    assert caplog.records[0].getMessage().startswith("steps 11-16: every group of 8 completions scored alike")


def test_only_the_main_process_writes_status(tmp_path, caplog):
    run_dir = _run_dir(tmp_path)
    args, state = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[]), TrainerState()
    check = GroupSignalCheck(None, num_generations=8)  # another rank: run_dir None, as the session builds it
    with caplog.at_level(logging.WARNING, logger="backend.train"):
        for step in range(1, NO_SIGNAL_STEPS + 1):
            _step(check, args, state, step, 1.0)
    assert check.warning is not None and "train_warning" not in read_status(run_dir)
