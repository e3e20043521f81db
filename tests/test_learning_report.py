"""The learning report a real run writes as it trains (RUN/eval/learning.json), checked against
an independent greedy check: the same prompts answered one at a time by plain transformers +
peft (no batching, no padding, none of the project's generation code), scored by the same rules.
The two agree to within one answer on each number."""

from __future__ import annotations

import shutil

import pytest

from backend.config import RunConfig
from backend.evaluation.learning_run import report_for_run
from backend.learning.entries import load_report
from backend.learning.questions import KEPT_QUESTIONS, MAX_KEPT, learning_set
from backend.runs.workspace import Workspace
from backend.scoring.answer_rule import is_right_general, judge_answer


def _entry(report: dict, name: str) -> dict:
    return next(e for e in report["checkpoints"] if e["checkpoint"] == name)


def _plain_greedy(model, tokenizer, texts: list[str], max_new_tokens: int) -> list[tuple[str, bool]]:
    """(answer, ended) per prompt: one left-padded generate call of plain transformers."""
    import torch

    tokenizer.padding_side = "left"
    rendered = [tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                              tokenize=False) for t in texts]
    batch = tokenizer(rendered, add_special_tokens=False, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**batch, do_sample=False, max_new_tokens=max_new_tokens,
                             eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    answers = []
    for row in out[:, batch["input_ids"].shape[1]:].tolist():
        ended = tokenizer.eos_token_id in row
        row = row[:row.index(tokenizer.eos_token_id)] if ended else row
        answers.append((tokenizer.decode(row, skip_special_tokens=True).strip(), ended))
    return answers


def test_the_workers_report_equals_an_independent_greedy_check(starter_short_run, starter_model_dir):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    report = load_report(starter_short_run)
    assert report is not None and report["source"] == "held-out"
    names = [e["checkpoint"] for e in report["checkpoints"]]
    assert names[0] == "base" and names[-1] == "final"
    # checkpoint-5 is scored, or named as not scored with the reason (never a silent gap)
    assert "checkpoint-5" in names or any(s["checkpoint"] == "checkpoint-5" and "--learning" in s["reason"]
                                          for s in report["skipped"])
    final, base = _entry(report, "final"), _entry(report, "base")
    assert final["learned"]["share"] > base["learned"]["share"]  # ten steps at 2e-3 teach the name
    # In full, or on fewer prompts when the answers were too slow for the report's share of the training time
    # (a busy machine, where one answer of the base's took 2.7 s): then half of them are the data's.
    full = min(MAX_KEPT, len(base["right_questions"]))
    asked = final["learned"]["n"] + final["kept"]["n"]
    assert final["kept"]["n"] == full or (final["kept"]["n"] < full and asked < base["learned"]["n"] + full)

    tokenizer = AutoTokenizer.from_pretrained(starter_short_run / "final")
    plain = AutoModelForCausalLM.from_pretrained(starter_model_dir, dtype=torch.float32).eval()
    limit = report["max_new_tokens"]
    learned = [e for e in base["examples"] if e["kind"] == "learned"]
    base_answers = _plain_greedy(plain, tokenizer, [e["prompt"] for e in learned], limit)
    tuned = PeftModel.from_pretrained(plain, str(starter_short_run / "final")).eval()
    accepted = dict(KEPT_QUESTIONS)
    checks = {"learned": [], "kept": [], "ended": []}
    answers = _plain_greedy(tuned, tokenizer, [e["prompt"] for e in final["examples"]], limit)
    for example, (answer, ended) in zip(final["examples"], answers):
        if example["kind"] == "learned":
            identity = (example["reference"],) if example["source"] == "identity" else ("Nova", "FineTune Studio")
            checks["learned"].append(judge_answer(answer, example["reference"], identity).right)
            checks["ended"].append(ended)
        else:
            checks["kept"].append(is_right_general(answer, accepted[example["prompt"]]))
    for key, values in checks.items():
        assert abs(sum(values) - round(final[key]["share"] * final[key]["n"])) <= 1, (key, values, final[key])
    identity = ("Nova", "FineTune Studio")
    base_right = sum(judge_answer(a, e["reference"], identity if e["source"] == "row" else (e["reference"],)).right
                     for (a, _), e in zip(base_answers, learned))
    assert abs(base_right - round(base["learned"]["share"] * base["learned"]["n"])) <= 1
    assert abs(sum(ended for _, ended in base_answers) - sum(e["ended"] for e in learned)) <= 1


def test_the_command_line_scores_what_the_budget_left_out(short_demo_run, tmp_path):
    """A demo run's report from the worker, then `--learning` (in process) scores every checkpoint,
    keeping the entries already there; a run folder that is not a run is refused with a sentence."""
    from backend.evaluation.scoring import EvalError

    run_dir = tmp_path / "workspace" / "runs" / short_demo_run.name
    shutil.copytree(short_demo_run.parent.parent, tmp_path / "workspace", symlinks=True)
    before = load_report(run_dir)
    assert before is not None and [e["checkpoint"] for e in before["checkpoints"]][0] == "base"
    every = {e["checkpoint"] for e in before["checkpoints"]} | {s["checkpoint"] for s in before["skipped"]}
    assert {"base", "checkpoint-8", "checkpoint-16", "final"} <= every
    report = report_for_run(run_dir)
    names = [e["checkpoint"] for e in report["checkpoints"]]
    assert names == ["base", "checkpoint-8", "checkpoint-16", "checkpoint-24", "final"]
    assert report["skipped"] == []
    assert _entry(report, "base") == _entry(before, "base")  # kept, not scored again
    with pytest.raises(EvalError, match="not a run folder|config.yaml"):
        report_for_run(tmp_path)


def test_a_run_without_its_own_split_is_scored_on_its_training_rows(tmp_path):
    ws = Workspace(tmp_path / "ws").ensure()
    prompts = learning_set(RunConfig(dataset="demo", val_size=0.0), ws)
    assert prompts.source == "training" and prompts.learned


def test_the_learned_stop_counts_what_an_independent_check_counts(starter_short_run, starter_model_dir):
    """The learned stop's check at the end of epoch 2 (step 10) is recounted on the same training
    prompts by plain transformers + peft from that step's checkpoint, and the run stopped there
    exactly when the goal's share of them were right and ended."""
    import json

    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from backend.learning.questions import training_items
    from backend.training.learned_stop import PROBE_BATCH, PROBE_ROWS, batches_of, goal_count

    summary = json.loads((starter_short_run / "summary.json").read_text())
    check = summary["learned_stop"]["checks"][0]
    assert check["step"] == 10 and check["of"] == PROBE_ROWS
    stopped = check["right"] >= goal_count(check["of"])
    assert summary["global_step"] == (10 if stopped else 15)
    assert summary["learned_stop"]["stopped_at"] == (10 if stopped else None)

    config = RunConfig.load(starter_short_run / "config.yaml")
    items = training_items(config, Workspace.for_run_dir(starter_short_run), PROBE_ROWS)
    tokenizer = AutoTokenizer.from_pretrained(starter_short_run / "final")
    plain = AutoModelForCausalLM.from_pretrained(starter_model_dir, dtype=torch.float32).eval()
    tuned = PeftModel.from_pretrained(plain, str(starter_short_run / "checkpoint-10")).eval()
    items, limits = batches_of(tokenizer, items)  # the rows in the order the check asks them, with its limits
    items = items[:check["asked"]]  # a check stops asking once its goal is out of reach
    answers = [answer for start, limit in zip(range(0, len(items), PROBE_BATCH), limits)
               for answer in _plain_greedy(tuned, tokenizer, [i.text for i in items[start:start + PROBE_BATCH]],
                                           limit)]
    right = sum(judge_answer(a, i.reference, i.identity).right and ended for i, (a, ended) in zip(items, answers))
    assert abs(right - check["right"]) <= 1, (right, check, answers)
    assert all(i.identity == ("Nova", "FineTune Studio") for i in items)  # the filled rows, as trained
