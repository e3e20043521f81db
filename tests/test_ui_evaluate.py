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
    assert checkpoints["value"] == ["base", "final"]  # the base, the best (no eval: final/) and the newest
    assert evaluate.on_load(ctx, "en", "deleted-run")[0]["value"] == "run-a"
    # The Runs tab names the run shown (its page load does): the ticked checkpoints stay.
    assert evaluate.on_shared_run(ctx, "en", "run-a", "run-a") == (SKIP, SKIP, SKIP, SKIP)
    assert evaluate.on_shared_run(ctx, "en", "run-a", None)[0]["value"] == "run-a"
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


def test_the_checkpoint_list_follows_the_run_to_its_end(tmp_path, demo_model_dir):
    """The list stayed as it was when the page opened after the run ended; its default is the base,
    the best checkpoint and the newest."""
    from tests.eval_export_runs import hold_back_the_end

    ctx = evaluate_tab_context(tmp_path, demo_model_dir)
    run_dir = ctx.workspace.runs_dir / "run-a"
    summary = json.loads((run_dir / "summary.json").read_text())
    # As the worker writes it at the end, from the eval lines.
    (run_dir / "summary.json").write_text(json.dumps({**summary, "best_checkpoint": "checkpoint-8"}))
    put_back = hold_back_the_end(run_dir, tmp_path / "aside")
    _, opened, _, _ = evaluate.refresh_runs(ctx, "en", "run-a")
    assert opened["choices"] == opened["value"] == ["base", "checkpoint-8"]
    listed, seen = evaluate.refresh_checkpoints(ctx, "run-a", opened["value"], None)
    put_back()
    listed, seen = evaluate.refresh_checkpoints(ctx, "run-a", opened["value"], seen)
    assert listed["choices"] == ["base", "checkpoint-8", "checkpoint-16", "final"]
    assert listed["value"] == ["base", "checkpoint-8", "final"]
    assert evaluate.refresh_checkpoints(ctx, "run-a", listed["value"], seen) == (SKIP, seen)


def test_a_tick_that_keeps_the_users_choice_does_not_write_it_back(tmp_path, demo_model_dir):
    """The tick's value is the one when it was sent; the user may have ticked boxes since (a busy
    machine), so a kept choice is left to the page: the update carries the choices only."""
    from tests.eval_export_runs import hold_back_the_end

    ctx = evaluate_tab_context(tmp_path, demo_model_dir)
    run_dir = ctx.workspace.runs_dir / "run-a"
    put_back = hold_back_the_end(run_dir, tmp_path / "aside")
    _, opened, _, _ = evaluate.refresh_runs(ctx, "en", "run-a")
    listed, seen = evaluate.refresh_checkpoints(ctx, "run-a", ["checkpoint-8"], None)
    assert "value" not in listed and listed["choices"] == opened["choices"]
    put_back()
    listed, seen = evaluate.refresh_checkpoints(ctx, "run-a", ["checkpoint-8"], seen)
    assert "value" not in listed and listed["choices"][-1] == "final"
