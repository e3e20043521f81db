"""Preference stages end to end: real TRL trainers (DPO, ORPO, SimPO, KTO) on
the demo model through the worker's command line (`python -m backend.train`),
LoRA continuing the demo SFT adapter, QLoRA 4-bit, stop then resume, the run
folder contract, preference metrics in the Evaluate path, and refusals."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from backend.runs.files import list_checkpoints, read_status
from tests.worker_runs import records, worker

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
# Four pairs and a batch of four: every step sees the same batch, so "the loss
# falls" and "the margin grows" are about learning, not about which pairs a step drew.
QUICK = ["cutoff_len=48", "per_device_train_batch_size=4", "per_device_eval_batch_size=4", "logging_steps=1",
         "learning_rate=1e-3", "warmup_ratio=0", "lora_dropout=0"]


def pairs(count: int) -> list[dict]:
    from backend.data.demo_pairs import build_demo_pairs

    return build_demo_pairs()[:count]


@pytest.fixture
def four_pairs(workspace) -> Path:
    path = workspace.root / "pairs.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in pairs(4)), encoding="utf-8")
    return path


def assert_contract(result, run_dir: Path, stage: str) -> dict:
    """Completed, with every file of the run folder contract and the preference numbers."""
    status = read_status(run_dir)
    assert result.returncode == 0 and status["state"] == "completed", f"{status.get('error')}\n{result.stderr[-3000:]}"
    for name in ("config.yaml", "status.json", "metrics.jsonl", "train.log", "summary.json"):
        assert (run_dir / name).is_file(), name
    assert (run_dir / "final" / "COMPLETE").is_file()
    assert any((run_dir / "final" / name).is_file() for name in ("adapter_model.safetensors", "model.safetensors"))
    assert all((c / "COMPLETE").is_file() for c in list_checkpoints(run_dir)) and list_checkpoints(run_dir)
    assert f"stage: {stage}" in (run_dir / "config.yaml").read_text()
    assert [r["event"] for r in records(run_dir, "system")][-1] == "end"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["state"] == "completed" and "final_train_reward_margin" in summary
    return summary


def assert_learns(run_dir: Path) -> None:
    train = records(run_dir, "train")
    losses, margins = [r["loss"] for r in train], [r["rewards/margins"] for r in train]
    assert losses[-1] < losses[0], losses
    assert margins[-1] > margins[0], margins  # chosen minus rejected reward on the training pairs
    assert {"rewards/chosen", "rewards/rejected", "logps/chosen", "logps/rejected"} <= set(train[-1])


def test_dpo_continues_the_sft_adapter_with_eval_metrics_and_preference_scores(workspace, subprocess_env,
                                                                               trained_demo_run):
    from backend.data.saved_datasets import save_dataset
    from backend.evaluation.evaluator import evaluate_run

    save_dataset(workspace.datasets_dir, "pairs6", pairs(6), source={"path": "test", "sha256": None}, fixes=[],
                 rows_before=6, eval_ratio=0.34, seed=1)
    run = workspace.runs_dir / "dpo-sft"
    result = worker(workspace, subprocess_env, "stage=dpo", "dataset=pairs6", *QUICK, "max_steps=6", "save_steps=3",
                    f"init_adapter={trained_demo_run / 'final'}", run_dir=run)
    summary = assert_contract(result, run, "dpo")
    assert_learns(run)
    evals = records(run, "eval")
    assert len(evals) == 2 and {"eval_rewards/accuracies", "eval_rewards/margins"} <= set(evals[-1])
    assert summary["final_eval_preference_accuracy"] == round(evals[-1]["eval_rewards/accuracies"], 4)
    assert "reference: the adapter" in (run / "train.log").read_text()
    # Continued, not new: the first step's policy equals its reference (the SFT adapter), so the
    # loss is exactly log 2, and the SFT adapter's shape is kept.
    assert records(run, "train")[0]["loss"] == pytest.approx(0.693147, abs=1e-4)
    sft = json.loads((trained_demo_run / "final" / "adapter_config.json").read_text())
    assert json.loads((run / "final" / "adapter_config.json").read_text())["r"] == sft["r"]
    # The Evaluate path: preference accuracy and mean margin per checkpoint on the held-out pairs.
    scores = evaluate_run(run, ["base", "final"])["results"]
    assert scores["final"]["num_pairs"] == 2 and scores["final"]["mean_margin"] > 0
    assert 0 <= scores["base"]["preference_accuracy"] <= 1
    assert json.loads((run / "eval" / "final" / "metrics.json").read_text())["preference_accuracy"] is not None


@pytest.mark.parametrize("stage,method", [("dpo", "qlora"), ("dpo", "full"), ("orpo", "lora"), ("simpo", "lora"),
                                          ("kto", "lora")])
def test_stage_trains_on_pairs(workspace, subprocess_env, four_pairs, stage, method):
    run = workspace.runs_dir / f"{stage}-{method}"
    extra = {"qlora": ["quantization_bits=4"], "full": ["learning_rate=1e-4"]}.get(method, [])
    result = worker(workspace, subprocess_env, f"stage={stage}", f"method={method}", f"dataset={four_pairs}",
                    *QUICK, *extra, "val_size=0", "max_steps=5", "save_steps=5", run_dir=run)
    summary = assert_contract(result, run, stage)
    assert_learns(run)
    # Tokens are counted for every stage (ORPO / SimPO batches have chosen_ / rejected_input_ids only),
    # without the Trainer's "Tried to track the number of tokens seen" warning in the log.
    assert all(r["tokens_per_second"] > 0 for r in records(run, "train")), records(run, "train")
    assert summary["train_tokens"] > 0 and summary["train_tokens_per_second"] > 0, summary
    assert "Tried to track the number of tokens seen" not in (run / "train.log").read_text() + result.stderr
    if method == "full":
        assert "reference: a frozen copy of the model" in (run / "train.log").read_text()
    elif stage == "dpo":
        assert "reference: the base model (adapter disabled)" in (run / "train.log").read_text()
        assert not (run / "final" / "ref").exists()  # no reference copy is kept or saved


def test_dpo_stop_then_resume(workspace, subprocess_env, four_pairs):
    run = workspace.runs_dir / "dpo-stop"
    process = worker(workspace, subprocess_env, "stage=dpo", f"dataset={four_pairs}", *QUICK, "val_size=0",
                     "max_steps=10", "save_steps=100", run_dir=run, wait=False)
    deadline = time.time() + 300
    while not any(r["step"] >= 2 for r in _safe_train(run)):
        assert process.poll() is None and time.time() < deadline, (run.parent / "dpo-stop.out").read_text()[-3000:]
        time.sleep(0.3)
    os.killpg(process.pid, signal.SIGTERM)
    assert process.wait(timeout=300) == 0
    status = read_status(run)
    assert status["state"] == "stopped" and 2 <= status["global_step"] < 10
    result = worker(workspace, subprocess_env, args=["--resume", str(run)])
    assert_contract(result, run, "dpo")
    steps = [r["step"] for r in records(run, "train")]
    assert steps[-1] == 10 and steps.count(10) == 1
    assert [r["event"] for r in records(run, "system")] == ["start", "end", "resume", "end"]
    # Resumed from the trained adapter: the step after the stop is past log 2 (a fresh adapter is at it).
    after = next(r for r in records(run, "train") if r["step"] == status["global_step"] + 1)
    assert after["loss"] < 0.69
    # Another stage on resume would load this adapter into a different objective: refused.
    refused = worker(workspace, subprocess_env, "stage=orpo", args=["--resume", str(run)])
    assert refused.returncode == 2 and "stage" in refused.stderr


def _safe_train(run: Path) -> list[dict]:
    try:
        return records(run, "train")
    except (FileNotFoundError, json.JSONDecodeError):
        return []


@pytest.mark.parametrize("sets,words", [
    (["stage=kto", "loss_type=ipo"], "does not apply to stage kto"),
    (["stage=dpo", "dataset=demo"], "holds instruction rows"),
    # sft on pairs read no 'messages' from them and ended in a KeyError traceback.
    (["stage=sft", "dataset=demo-pairs"], "stage sft trains on instruction or chat rows, but demo-pairs holds "
                                          "preference pairs"),
])
def test_refused_preference_settings_exit_2(workspace, subprocess_env, sets, words):
    run = workspace.runs_dir / "refused"
    result = worker(workspace, subprocess_env, *sets, "max_steps=1", run_dir=run)
    assert result.returncode == 2, result.stderr[-2000:]
    assert words in result.stderr and "Traceback" not in result.stderr


def pair_file(workspace, name: str, rows: list[tuple[str, str, str]]) -> Path:
    path = workspace.root / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"prompt": p, "chosen": c, "rejected": r}) + "\n" for p, c, r in rows))
    return path


@pytest.mark.parametrize("rows, words", [
    # Every chosen answer equals its rejected one: DPO's loss is a constant, nothing to learn.
    ([(f"Question {i}?", f"Answer {i}.", f"Answer {i}.") for i in range(4)],
     ["4 chosen same as rejected", "teaches no preference", "same_answer"]),
    # Empty answers: the advice is to fill or drop them, not to raise cutoff_len.
    ([("Question 1?", "", "No."), ("Question 2?", "Yes.", ""), ("Question 3?", "", "")],
     ["3 empty chosen / rejected answer", "--drop-empty"]),
])
def test_pairs_that_teach_nothing_are_refused_with_what_to_do(workspace, subprocess_env, rows, words):
    from backend.config_recipes import tiny_config

    config = workspace.root / "tiny.yaml"
    tiny_config().save(config)
    run = workspace.runs_dir / "nothing"
    data = pair_file(workspace, "pairs", rows)
    result = worker(workspace, subprocess_env, "stage=dpo", f"dataset={data}", "val_size=0", "max_steps=1",
                    args=["--config", str(config), "--run-dir", str(run)])
    assert result.returncode == 2, result.stderr[-3000:]
    log = (run / "train.log").read_text() if (run / "train.log").exists() else result.stderr
    assert "Traceback" not in result.stderr + log and "raise cutoff_len" not in log
    assert all(word in log for word in words), log[-2000:]
    assert read_status(run)["state"] == "failed"
