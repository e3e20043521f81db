"""The Evaluate tab's handlers called with the values a browser sends, on a real
LoRA run of the demo model: the run and checkpoint lists, every refusal, and a
real background evaluation of an uploaded file drawn into the table, chart and
predictions once its result files appear."""

from __future__ import annotations

import json

import pytest

from backend.runs.workspace import Workspace
from tests.eval_export_runs import evaluate_tab_context
from tests.polling import wait_for
from ui.context import UIContext
from ui.tabs import evaluate

SKIP = {"__type__": "update"}


@pytest.fixture(scope="module")
def ctx(tmp_path_factory, demo_model_dir):
    return evaluate_tab_context(tmp_path_factory.mktemp("evaluate-tab"), demo_model_dir)


def test_run_and_checkpoint_lists(ctx, tmp_path):
    run, checkpoints, message, signature = evaluate.refresh_runs(ctx, "en", None)
    assert run["choices"] == ["run-a"] and run["value"] == "run-a" and message == "" and signature == ""
    assert checkpoints["choices"] == ["base", "checkpoint-8", "checkpoint-16", "final"]
    assert checkpoints["value"] == ["base", "checkpoint-16", "final"]  # the base and the two newest
    assert evaluate.on_load(ctx, "en", "deleted-run")[0]["value"] == "run-a"
    assert evaluate.on_run(ctx, None) == ({"__type__": "update", "choices": [], "value": []}, "")
    empty = UIContext(workspace=Workspace(tmp_path / "ws").ensure(), texts=ctx.texts, i18n=None)
    assert "No runs yet" in evaluate.refresh_runs(empty, "en", None)[2]
    assert evaluate.poll(ctx, "en", None, True, "sig") == ("", SKIP, SKIP, SKIP, "sig")


def test_refusals_say_what_to_do(ctx, tmp_path):
    def start(**changes):
        values = {"current": "run-a", "chosen": ["base"], "source_kind": "split", "upload_path": None,
                  "samples": 2, "new_tokens": 8, **changes}
        return evaluate.start_eval(ctx, "en", *values.values())

    assert start(current=None) == "Pick a run first."
    assert "Upload an evaluation file first" in start(source_kind="file")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a table")
    assert "must end in .json, .jsonl" in start(source_kind="file", upload_path=str(notes))
    assert start(chosen=[]).startswith("Cannot evaluate:") and "checkpoint" in start(chosen=[])
    assert not (ctx.workspace.runs_dir / "run-a" / "eval" / "progress.json").exists()  # nothing started


@pytest.mark.usefixtures("starts_processes")
def test_an_uploaded_file_is_evaluated_in_the_background_and_drawn(ctx, tmp_path):
    upload = tmp_path / "my questions.jsonl"
    rows = [{"instruction": "What is 2 + 3?", "input": "", "output": "2 + 3 = 5."},
            {"instruction": "Say hi.", "input": "", "output": "Hi!"}]
    upload.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    said = evaluate.start_eval(ctx, "en", "run-a", ["base", "checkpoint-16"], "file", str(upload), 0, 8)
    assert said.startswith("Evaluation started in the background (pid ")
    run_dir = ctx.workspace.runs_dir / "run-a"
    kept = list((run_dir / "eval" / "uploads").iterdir())
    assert [p.suffix for p in kept] == [".jsonl"] and "my questions" not in kept[0].name  # a content-hash name
    assert ctx.saved()["run_id"] == "run-a"

    def finished():
        out = evaluate.poll(ctx, "en", "run-a", False, "")
        return out if 'id="evaluate-running"' not in out[0] and out[0] else None

    bar, table, figure, predictions, signature = wait_for(finished, "the evaluation job to end")
    assert 'id="evaluate-done"' in bar, bar
    assert list(table["checkpoint"]) == ["base", "checkpoint-16"] and set(table["samples"]) == {2}
    assert list(predictions.columns) == ["index", "prompt", "reference", "base", "checkpoint-16", "distinct"]
    assert len(predictions) == 2 and figure is not None
    assert evaluate.poll(ctx, "en", "run-a", False, signature)[1:4] == (SKIP, SKIP, SKIP)  # unchanged: not redrawn
    only_disagree = evaluate.redraw(ctx, "en", "run-a", True)[3]
    assert len(only_disagree) == sum(predictions["distinct"] > 1)
