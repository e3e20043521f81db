"""Benchmarks with lm-evaluation-harness on a real run of the demo model: the
command line writes eval/<checkpoint>/benchmarks.json for the base and each
checkpoint, the multiple-choice accuracy equals an independent count of the
right answer having the highest log-likelihood (transformers + peft, no
lm-eval), and every bad input ends in its sentence before a model loads."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml

from backend.evaluation.benchmark_specs import BenchmarkError
from backend.evaluation.benchmark_tasks import FACTS_ANSWER, FACTS_CHOICE, bundled_dir
from backend.evaluation.benchmarks import benchmark_table, load_benchmarks, run_benchmarks
from backend.messages import message_of
from backend.runs.workspace import Workspace
from tests.eval_export_runs import copy_run, link_demo_model, one_torch_thread

pytestmark = pytest.mark.usefixtures("one_torch_thread")
_ = one_torch_thread  # the fixture, imported for pytest to find

CHECKPOINTS = ["base", "checkpoint-8", "final"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, demo_model_dir, short_demo_run):
    """A copy of the session's short demo run (24 steps, the real worker)."""
    workspace = Workspace(tmp_path_factory.mktemp("benchmarks") / "workspace").ensure()
    link_demo_model(workspace, demo_model_dir)
    return copy_run(short_demo_run, workspace, "demo-run")


@pytest.fixture(scope="module")
def cli_output(run_dir):
    result = subprocess.run(
        [sys.executable, "-m", "backend.evaluate", "--run", str(run_dir), "--benchmark", FACTS_CHOICE, FACTS_ANSWER,
         "--checkpoint", *CHECKPOINTS], env=_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _env() -> dict:
    import os
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    return dict(os.environ, PYTHONPATH=str(repo), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                OMP_NUM_THREADS="1")


def test_cli_writes_numbers_per_checkpoint(run_dir, cli_output):
    results = load_benchmarks(run_dir)
    assert list(results) == CHECKPOINTS
    assert [r["step"] for r in results.values()] == [0, 8, 24]
    for record in results.values():
        choice, answer = record["tasks"][FACTS_CHOICE], record["tasks"][FACTS_ANSWER]
        assert choice["samples"] == 40 and answer["samples"] == 20
        assert choice["primary"] == "acc" and answer["primary"] == "exact_match"
        assert 0 <= choice["metrics"]["acc"] <= 1 and 0 <= answer["metrics"]["exact_match"] <= 1
        assert choice["source"] == "bundled" and choice["chat_template"] is True
    rows = benchmark_table(results)
    assert [r["checkpoint"] for r in rows] == CHECKPOINTS and f"{FACTS_CHOICE} acc" in rows[0]
    for name in CHECKPOINTS:
        assert any(line.startswith(name) for line in cli_output.splitlines()), cli_output


def _independent_accuracy(run_dir, adapter: str | None) -> float:
    """Share of questions whose right answer has the highest summed log-probability after the prompt in
    the chat template, computed with transformers (+ peft) directly."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = run_dir.parents[1] / "models" / "demo"
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    if adapter:
        model = PeftModel.from_pretrained(model, run_dir / adapter).eval()
    docs = [json.loads(line) for line in
            (bundled_dir(run_dir.parents[1]) / FACTS_CHOICE / "data.jsonl").read_text(encoding="utf-8").splitlines()]
    right = 0
    for doc in docs:
        context = tokenizer.apply_chat_template([{"role": "user", "content": doc["question"]}], tokenize=False,
                                                add_generation_prompt=True)
        context_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
        scores = []
        for choice in doc["choices"]:
            ids = tokenizer(context + choice, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
            scores.append(sum(logp[i - 1, ids[i]].item() for i in range(len(context_ids), len(ids))))
        right += scores.index(max(scores)) == doc["answer"]
    return right / len(docs)


@pytest.mark.parametrize("name,adapter", [("base", None), ("final", "final")])
def test_choice_accuracy_equals_an_independent_count(run_dir, cli_output, name, adapter):
    measured = load_benchmarks(run_dir)[name]["tasks"][FACTS_CHOICE]["metrics"]["acc"]
    assert measured == pytest.approx(_independent_accuracy(run_dir, adapter), abs=1e-9)


# ---------------------------------------------------------------- bad input: a sentence each

def _refusal(run_dir, tasks, **kwargs) -> str:
    with pytest.raises(BenchmarkError) as caught:
        run_benchmarks(run_dir, tasks, ["base"], **kwargs)
    assert message_of(caught.value) is not None  # catalogued: the Chinese UI shows it in Chinese
    return str(caught.value)


def _task_file(tmp_path, **fields):
    data = tmp_path / "quiz.jsonl"
    data.write_text(json.dumps({"q": "2 + 2?", "choices": ["4", "5"], "a": 0}) + "\n", encoding="utf-8")
    config = {"task": "my_quiz", "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data)}},
              "test_split": "test", "output_type": "multiple_choice", "doc_to_text": "{{q}}",
              "doc_to_choice": "{{choices}}", "doc_to_target": "a", **fields}
    config = {k: v for k, v in config.items() if v is not None}
    path = tmp_path / "quiz.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.mark.parametrize("fields,expected", [
    ({"doc_to_choice": None}, "has no doc_to_choice: the answers a multiple_choice task picks from"),
    ({"test_split": None}, "has no test_split"),
    ({"task": None}, "has no task: the name the results are listed under"),
    ({"dataset_kwargs": None}, "has no dataset_kwargs.data_files"),
    ({"dataset_kwargs": {"data_files": {"test": "quiz.jsonl"}}}, "the file is beside the task file: write it as"),
    ({"dataset_kwargs": {"data_files": {"test": "/nowhere/quiz.jsonl"}}}, "reads /nowhere/quiz.jsonl"),
    ({"output_type": "ranking"}, "output_type 'ranking'"),
])
def test_a_task_file_with_a_missing_field_is_named(run_dir, tmp_path, fields, expected):
    said = _refusal(run_dir, [str(_task_file(tmp_path, **fields))])
    assert expected in said and "quiz.yaml" in said, said


def test_broken_task_files_and_names(run_dir, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("task: [unclosed\n", encoding="utf-8")
    assert "is not valid YAML" in _refusal(run_dir, [str(broken)])
    assert "does not exist" in _refusal(run_dir, [str(tmp_path / "gone.yaml")])
    (tmp_path / "empty").mkdir()
    assert "holds no task YAML file" in _refusal(run_dir, [str(tmp_path / "empty")])
    assert "Choose at least one benchmark task" in _refusal(run_dir, [" "])
    said = _refusal(run_dir, ["hellaswg"])
    assert "No benchmark task 'hellaswg'" in said and "Did you mean hellaswag" in said
    assert "studio_facts_choice" in said  # the local alternatives are named


def test_a_hub_task_offline_names_the_local_tasks(run_dir):
    result = subprocess.run([sys.executable, "-m", "backend.evaluate", "--run", str(run_dir), "--benchmark",
                             "hellaswag", "--checkpoint", "base"], env=_env(), capture_output=True, text=True)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Task 'hellaswag' needs its data from the Hugging Face hub, which cannot be reached (HF_HUB_OFFLINE is " \
           "set)" in result.stderr and "studio_facts_choice" in result.stderr


def test_a_run_whose_base_is_gone(run_dir, tmp_path):
    gone = copy_run(run_dir, Workspace(run_dir.parents[1]), "base-gone")
    shutil.rmtree(gone / "eval", ignore_errors=True)
    config = yaml.safe_load((gone / "config.yaml").read_text(encoding="utf-8"))
    config["model_name_or_path"] = str(tmp_path / "deleted-model")
    (gone / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    said = _refusal(gone, [FACTS_CHOICE])
    assert f"The base model of run base-gone is gone: {tmp_path / 'deleted-model'} does not exist" in said
    assert not (gone / "eval" / "base" / "benchmarks.json").exists()
