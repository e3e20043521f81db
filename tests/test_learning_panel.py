"""The learning report in the app (ui/panels/learning_panel.py, the Train tab's Plan): a report scored
in this process by the real reporter on the tiny demo model (no worker), then read by the
Runs, Chat and Evaluate handlers, in English and Chinese."""

from __future__ import annotations

import pytest

from backend.config import RunConfig
from backend.config_recipes import tiny_config
from backend.learning.entries import load_report
from backend.learning.questions import MIN_KEPT
from backend.learning.reporter import LearningReporter
from backend.learning.table import report_table, warnings
from backend.runs.workspace import Workspace
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.panels import learning_panel
from ui.tabs import chat, evaluate, runs, train
from ui.views import train_summary


def score_demo_run(workspace, name: str, right: int):
    """A run folder whose learning.json holds the base and final/ (the demo model both times), the base
    answering `right` general questions right."""
    import torch

    from backend.models.loading import load_model, load_tokenizer

    run_dir = workspace.runs_dir / name
    run_dir.mkdir()
    config = tiny_config()
    config.save(run_dir / "config.yaml")
    model_path = workspace.models_dir / "demo"
    tokenizer = load_tokenizer(model_path)
    model = load_model(model_path, dtype=torch.float32)
    reporter = LearningReporter(run_dir, config, workspace, tokenizer, model_path)
    # The tiny model knows no general answer through the chat template (how many, if any, its noise
    # happens to hold depends on its build), so its "kept" questions accept any answer: the panels
    # need a base with right answers to draw a kept line, and the scores have their own tests.
    reporter.prompts.kept = [(question, ("",)) for question, _ in reporter.prompts.kept[:right]]
    reporter.score(model, "base", 0)
    reporter.score(model, "final", 12)
    return reporter


@pytest.fixture(scope="module")
def scored_workspace(tmp_path_factory, demo_model_dir, starter_model_dir):
    """One workspace for the module, its reports scored once: the panels only read them."""
    ws = Workspace(tmp_path_factory.mktemp("learning-panel") / "workspace").ensure()
    (ws.models_dir / "demo").symlink_to(demo_model_dir, target_is_directory=True)
    (ws.models_dir / starter_model_dir.name).symlink_to(starter_model_dir, target_is_directory=True)
    score_demo_run(ws, "demo-report", MIN_KEPT + 1).skip("checkpoint-6", 6, "over the budget")
    score_demo_run(ws, "few-right", MIN_KEPT - 1)
    return ws


@pytest.fixture
def scored_run(scored_workspace):
    return scored_workspace.runs_dir / "demo-report"


@pytest.fixture
def ctx(scored_workspace):
    return UIContext(workspace=scored_workspace, texts=merge_texts(runs.TEXT, chat.TEXT, evaluate.TEXT, train.TEXT),
                     i18n=None)


def test_the_report_on_disk_has_an_entry_per_checkpoint(scored_run):
    report = load_report(scored_run)
    assert [e["checkpoint"] for e in report["checkpoints"]] == ["base", "final"]
    final = report["checkpoints"][1]
    assert set(final) >= {"checkpoint", "step", "learned", "kept", "ended", "examples"}
    assert final["learned"]["n"] == report["learned_prompts"] and final["kept"]["n"] <= 16
    assert report["skipped"] == [{"checkpoint": "checkpoint-6", "step": 6, "reason": "over the budget"}]


@pytest.mark.parametrize("lang,word", [("en", "held-out prompts of your data"), ("zh", "留出的提示")])
def test_the_runs_tab_draws_learned_and_kept_against_the_step(ctx, scored_run, lang, word):
    about, figure, signature = learning_panel.runs_poll(ctx, lang, scored_run.name, "")
    assert word in about and "checkpoint-6" in about  # what was measured, and what was not scored
    steps = {trace.name: list(trace.x) for trace in figure.data}
    assert steps[ctx.msg(lang, "runs.learning.learned")] == [0, 12]
    assert steps[ctx.msg(lang, "runs.learning.kept")] == [12]  # the base's own "kept" is no share
    again = learning_panel.runs_poll(ctx, lang, scored_run.name, signature)
    assert again[2] == signature  # unchanged file: nothing redrawn


def test_the_evaluate_tab_shows_the_table_and_chat_the_answers_side_by_side(ctx, scored_run):
    note, table, _ = learning_panel.evaluate_view(ctx, "en", scored_run.name, "")
    frame = table["value"]
    assert list(frame.iloc[:, 0]) == ["base", "final"] and "right of" in frame.iloc[0, 3]
    assert learning_panel.report_checkpoints(ctx, [scored_run.name])["choices"] == ["final"]
    note, rows = learning_panel.report_rows(ctx, "zh", [scored_run.name], "final", False)
    frame = rows["value"]
    report = load_report(scored_run)
    assert len(frame) == len(report["checkpoints"][1]["examples"])
    assert all(cell[0] in "✅❌" for cell in frame.iloc[:, 3]) and list(frame.columns)[-1] == "final"
    assert set(frame.iloc[:, 0]) <= {"学到", "保留"}


def test_kept_is_not_measured_when_the_base_answers_too_few_general_questions(ctx):
    """gemma-3-270m, a base model, answered 1 of 46 through its chat template: "kept 0 of 1" said nothing."""
    run_dir = ctx.workspace.runs_dir / "few-right"
    report = load_report(run_dir)
    base, final = report["checkpoints"]
    assert base["kept"]["n"] == MIN_KEPT - 1 and final["kept"] == {"share": None, "n": 0}
    assert not any(e["kind"] == "kept" for e in final["examples"])  # not asked: no time spent on them
    for lang, said in (("en", "kept is not measured"), ("zh", "未测量保留")):
        about, figure, _ = learning_panel.runs_poll(ctx, lang, run_dir.name, "")
        assert said in about and f"{MIN_KEPT - 1} " in about
        assert ctx.msg(lang, "runs.learning.kept") not in {trace.name for trace in figure.data}
    assert learning_panel.evaluate_view(ctx, "en", run_dir.name, "")[1]["value"].iloc[1, 3] == "–"
    assert "kept is not measured" in report_table(report)
    assert "learning.warn.kept" not in [m.id for m in warnings(report)]


def test_a_run_without_a_report_says_how_to_get_one(ctx):
    run_dir = ctx.workspace.runs_dir / "no-report"
    run_dir.mkdir()
    tiny_config().save(run_dir / "config.yaml")
    note, table, _ = learning_panel.evaluate_view(ctx, "en", "no-report", "")
    assert "--learning" in note and table["visible"] is False
    note, _ = learning_panel.report_rows(ctx, "en", ["no-report"], None, False)
    assert "--learning" in note
    assert learning_panel.start_learning(ctx, "en", "../elsewhere") == ctx.msg("en", "evaluate.learning.no_run")


def test_the_plan_says_what_the_report_asks_and_costs(ctx):
    msg = lambda key, **values: ctx.msg("en", key, **values)  # noqa: E731
    text = train_summary.derived_text(msg, RunConfig(), {"rows": 40})
    assert "Learning report" in text and "**4** prompts of your data (and 8 identity questions)" in text
    assert "10% of the training time" in text
    small = train_summary.derived_text(msg, RunConfig(dataset="faq.jsonl"), {"rows": 12})
    assert "No held-out split to score (12 rows" in small
    assert "Learning report" not in train_summary.derived_text(msg, RunConfig(learning_report=False), {"rows": 40})
