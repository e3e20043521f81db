"""Scorers chosen for an eval set, through the real evaluator on a real LoRA run of the demo model
(in-process): each answer's result in predictions.jsonl, the share passing each scorer per
checkpoint in metrics.json, the command line's --scorers file and its table, and a bad spec
refused before any model loads."""

from __future__ import annotations

import json

import pytest

from backend.evaluate import main
from backend.evaluation.cli import _table
from backend.evaluation.evaluator import evaluate_run
from backend.evaluation.results import load_predictions
from backend.evaluation.scoring import EvalError
from backend.runs.workspace import Workspace
from backend.scoring.items import Item
from backend.scoring.scorer_specs import parse_scorers
from tests.eval_export_runs import cached_run, link_demo_model, one_torch_thread

pytestmark = pytest.mark.usefixtures("one_torch_thread")
_ = one_torch_thread  # the fixture, imported for pytest to find

SCORERS = """
- {kind: contains, text: "5"}
- {kind: not_contains, text: 抱歉}
- {kind: rouge_l, threshold: 0.3}
- {kind: length, max: 12, name: short}
- {kind: exact_match, normalise: spaces}
"""
ROWS = [{"instruction": "What is 2 + 3?", "input": "", "output": "2 + 3 = 5."},
        {"instruction": "法国的首都是哪里？", "input": "", "output": "法国的首都是巴黎。"},
        {"instruction": "Say hi.", "input": "", "output": "Hi!"}]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, demo_model_dir):
    workspace = Workspace(tmp_path_factory.mktemp("evaluate-scorers") / "ws").ensure()
    link_demo_model(workspace, demo_model_dir)
    return cached_run(workspace, demo_model_dir, "lora", "run-a")


@pytest.fixture(scope="module")
def questions(tmp_path_factory):
    path = tmp_path_factory.mktemp("eval-set") / "questions.json"
    path.write_text(json.dumps(ROWS, ensure_ascii=False), encoding="utf-8")
    return path


def test_each_checkpoint_reports_the_chosen_scorers_per_row_and_as_a_share(run_dir, questions, tmp_path, capsys):
    from transformers import AutoTokenizer

    spec_file = tmp_path / "scorers.yaml"
    spec_file.write_text(SCORERS, encoding="utf-8")
    assert main(["--run", str(run_dir), "--checkpoint", "base", "checkpoint-16", "--data", str(questions),
                 "--max-new-tokens", "16", "--scorers", str(spec_file), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    names = ["contains", "not_contains", "rouge_l", "short", "exact_match"]
    tokenizer = AutoTokenizer.from_pretrained(run_dir.parents[1] / "models" / "demo")
    specs = [entry["spec"] for entry in summary["results"]["base"]["scorers"].values()]
    assert specs[3] == {"kind": "length", "max": 12, "name": "short"}  # each result names the spec it scored
    scorers = parse_scorers(specs)
    for checkpoint in ("base", "checkpoint-16"):
        metrics = summary["results"][checkpoint]
        assert list(metrics["scorers"]) == names
        lines = load_predictions(run_dir, checkpoint)
        assert len(lines) == 3 and all(list(line["scorers"]) == names for line in lines)
        for scorer in scorers:  # each row's result, recomputed from the written answer and reference
            for line in lines:
                item = Item(line["prediction"], line["reference"],
                            count_tokens=lambda t: len(tokenizer(t, add_special_tokens=False)["input_ids"]))
                assert line["scorers"][scorer.name] == scorer.score(item).as_dict(), (checkpoint, scorer.name)
            passed = [line["scorers"][scorer.name]["pass"] for line in lines]
            assert metrics["scorers"][scorer.name]["pass"] == pytest.approx(sum(passed) / 3)
            assert metrics["scorers"][scorer.name]["n"] == 3
        # the exact_match scorer (spaces) and Evaluate's own exact_match column are one check
        assert metrics["exact_match"] == pytest.approx(100 * metrics["scorers"]["exact_match"]["pass"])
        on_disk = json.loads((run_dir / "eval" / checkpoint / "metrics.json").read_text(encoding="utf-8"))
        assert on_disk["scorers"] == metrics["scorers"] and on_disk["data"] == "file questions.json"
    printed = _table(summary, run_dir)  # what the command prints without --json
    assert "Rows passing each scorer:" in printed
    share = summary["results"]["checkpoint-16"]["scorers"]["short"]["pass"]
    assert printed.splitlines()[-1].split()[0] == "checkpoint-16" and printed.splitlines()[-1].split()[4] == f"{share:.0%}"


def test_a_bad_scorer_is_refused_before_any_model_loads(run_dir, questions, capsys):
    with pytest.raises(EvalError, match=r"scorer 2 \(number\): tolerance -1 should be a number of 0 or more"):
        evaluate_run(run_dir, ["base"], data=questions, scorers=[{"kind": "rouge_l"},
                                                                 {"kind": "number", "tolerance": -1}])
    assert main(["--run", str(run_dir), "--checkpoint", "base", "--data", str(questions),
                 "--scorers", "[{kind: regex, pattern: '(<answer>'}]"]) == 2
    assert "scorer 1 (regex): pattern '(<answer>' is not a valid regular expression" in capsys.readouterr().err
