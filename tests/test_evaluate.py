"""Evaluation of real LoRA checkpoints: the command line writes metrics.json and
predictions.jsonl whose numbers equal independent computations."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import sacrebleu

from backend.evaluation.evaluator import evaluate_run, start_evaluation
from backend.evaluation.results import (
    best_per_metric,
    checkpoint_choices,
    disagreement_rows,
    load_results,
    training_eval_curve,
)
from backend.evaluation.scoring import EvalError, held_out_rows
from backend.runs.workspace import Workspace
from tests.eval_export_runs import checkpoint_names, copy_run, link_demo_model, one_torch_thread

pytestmark = pytest.mark.usefixtures("one_torch_thread")
_ = one_torch_thread  # the fixture, imported for pytest to find


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, demo_model_dir, short_demo_run):
    """A copy of the session's short demo run (24 steps), trained by the real worker."""
    workspace = Workspace(tmp_path_factory.mktemp("evaluate") / "workspace").ensure()
    link_demo_model(workspace, demo_model_dir)
    return copy_run(short_demo_run, workspace, "demo-run")


def _independent_loss(run_dir, rows):
    """Token-weighted mean of the model's own causal-LM loss (labels=...) per row."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from backend.data.encode import IGNORE_INDEX, encode_messages

    path = run_dir.parents[1] / "models" / "demo"
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    total = count = 0
    for row in rows:
        enc = encode_messages(tokenizer, row["messages"], 256)
        n = sum(label != IGNORE_INDEX for label in enc.labels[1:])
        with torch.no_grad():
            loss = model(input_ids=torch.tensor([enc.input_ids]), labels=torch.tensor([enc.labels])).loss.item()
        total, count = total + loss * n, count + n
    return total / count


@pytest.mark.slow
def test_cli_writes_metrics_and_predictions(run_dir, subprocess_env):
    last = checkpoint_names(run_dir)[-1]
    command = [sys.executable, "-m", "backend.evaluate", "--run", str(run_dir), "--checkpoint", "base",
               last, "--max-samples", "8", "--max-new-tokens", "32", "--json"]
    done = subprocess.run(command, env=subprocess_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert list(summary["results"]) == ["base", last]
    for name in ("base", last):
        metrics = json.loads((run_dir / "eval" / name / "metrics.json").read_text())
        predictions = [json.loads(line) for line in (run_dir / "eval" / name / "predictions.jsonl").open()]
        assert len(predictions) == metrics["num_samples"] == 8
        refs, preds = [p["reference"] for p in predictions], [p["prediction"] for p in predictions]
        tokenize = "zh" if any("\u4e00" <= c <= "\u9fff" for r in refs for c in r) else "13a"
        assert metrics["bleu"] == pytest.approx(sacrebleu.corpus_bleu(preds, [refs], tokenize=tokenize).score)
        assert metrics["perplexity"] == pytest.approx(2.718281828 ** metrics["eval_loss"], rel=1e-6)
        assert metrics["data"] == "the run's held-out split"
    rows = held_out_rows(run_dir)[:8]
    base = json.loads((run_dir / "eval" / "base" / "metrics.json").read_text())
    assert base["eval_loss"] == pytest.approx(_independent_loss(run_dir, rows), rel=1e-4)
    tuned = json.loads((run_dir / "eval" / last / "metrics.json").read_text())
    # The LoRA run learned the task: held-out loss better than the base's.
    assert tuned["eval_loss"] < base["eval_loss"]
    assert tuned["step"] == int(last.split("-")[1]) and base["step"] == 0

    results = load_results(run_dir)
    best = best_per_metric(results)
    assert best["eval_loss"] == last and best["perplexity"] == last
    table = disagreement_rows(run_dir, list(results))
    assert len(table) == 8 and table[0]["distinct"] >= table[-1]["distinct"]
    assert table[0]["base"] != table[0][last]


@pytest.mark.slow
def test_training_and_evaluate_report_one_eval_loss_for_a_checkpoint(workspace, short_demo_run):
    """The worker's eval_loss at a checkpoint (metrics.jsonl, the Runs chart) and Evaluate's for
    that checkpoint are one number: per assistant token over the same held-out split."""
    run_dir = copy_run(short_demo_run, workspace, "one-loss")
    during_training = dict(training_eval_curve(run_dir))
    name = checkpoint_names(run_dir)[0]
    step = int(name.split("-")[1])
    assert step in during_training
    result = evaluate_run(run_dir, [name], max_new_tokens=1)["results"][name]
    assert result["num_samples"] == len(held_out_rows(run_dir))  # the whole split, as training scored it
    assert result["eval_loss"] == pytest.approx(during_training[step], rel=1e-4)


@pytest.mark.slow
def test_uploaded_file_and_bad_choices(run_dir, tmp_path):
    names = checkpoint_names(run_dir)
    assert checkpoint_choices(run_dir) == ["base", *names, "final"]
    curve_steps = [step for step, _ in training_eval_curve(run_dir)]
    assert curve_steps == sorted(curve_steps) and {int(n.split("-")[1]) for n in names} <= set(curve_steps)
    data = tmp_path / "qa.json"
    data.write_text(json.dumps([{"instruction": "法国的首都是哪里？", "input": "", "output": "法国的首都是巴黎。"},
                                {"instruction": "What is 2 + 3?", "input": "", "output": "2 + 3 = 5."}],
                               ensure_ascii=False), encoding="utf-8")
    summary = evaluate_run(run_dir, [names[0]], data=data, max_new_tokens=16)
    metrics = summary["results"][names[0]]
    assert metrics["num_samples"] == 2 and metrics["data"] == "file qa.json" and metrics["bleu_tokenize"] == "zh"
    with pytest.raises(EvalError, match="No complete checkpoint checkpoint-99.*choose from: base"):
        evaluate_run(run_dir, ["checkpoint-99"])
    broken = tmp_path / "broken.json"
    broken.write_text('[{"instruction": "x",', encoding="utf-8")
    with pytest.raises(EvalError, match="Cannot use broken.json"):
        evaluate_run(run_dir, ["base"], data=broken)
    with pytest.raises(EvalError, match="at least one checkpoint"):
        start_evaluation(run_dir, [])


def test_the_command_line_finds_the_base_model_in_the_given_workspace(tmp_path, workspace, capsys):
    """A run folder outside workspace/runs (copied, moved) is evaluated with --workspace, as the other
    command lines take it: the base model config.yaml names (and its dataset) are looked up there."""
    from backend.config_recipes import tiny_config
    from backend.evaluate import main

    run_dir = tmp_path / "elsewhere" / "demo-copy"
    run_dir.mkdir(parents=True)
    tiny_config(val_size=0.1).save(run_dir / "config.yaml")
    assert main(["--run", str(run_dir), "--checkpoint", "base", "--max-samples", "2", "--max-new-tokens", "1",
                 "--workspace", str(workspace.root), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["num_samples"] == 2 and summary["results"]["base"]["eval_loss"] > 0
    assert (workspace.datasets_dir / "demo").is_dir()  # the run's dataset came from the same workspace
