"""The Evaluate tab's Benchmarks section called with the values a browser sends,
on a real LoRA run of the demo model: its refusals (in English and Chinese),
and a real background lm-eval job drawn into the table and the chart once its
benchmarks.json files appear."""

from __future__ import annotations

import pytest
import yaml

from tests.eval_export_runs import copy_run, evaluate_tab_context
from tests.polling import wait_for
from ui.panels import benchmark_panel

SKIP = {"__type__": "update"}


@pytest.fixture(scope="module")
def ctx(tmp_path_factory, demo_model_dir):
    return evaluate_tab_context(tmp_path_factory.mktemp("benchmark-tab"), demo_model_dir)


def start(ctx, lang="en", **changes):
    values = {"current": "run-a", "checkpoints": ["base"], "bundled": ["studio_facts_choice"], "other": "",
              "limit": 4, "chat_template": True, **changes}
    return benchmark_panel.start(ctx, lang, *values.values())


def test_refusals_say_what_to_do(ctx, tmp_path):
    assert start(ctx, current=None) == "Pick a run first."
    said = start(ctx, bundled=[], other="  ")
    assert said.startswith("Cannot run benchmarks: Choose at least one benchmark task: studio_facts_choice")
    assert start(ctx, checkpoints=[]).startswith("Cannot run benchmarks: Choose at least one checkpoint")
    assert start(ctx, "zh", bundled=[]).startswith("无法运行基准测试：请至少选择一个基准任务")
    assert [value for _, value in benchmark_panel.bundled_choices(ctx, "zh")] == \
        ["studio_facts_choice", "studio_facts_answer", "studio_general_choice"]
    assert "演示事实" in benchmark_panel.bundled_choices(ctx, "zh")[0][0]
    assert not (ctx.workspace.runs_dir / "run-a" / "eval" / "benchmark-progress.json").exists()  # nothing started
    assert benchmark_panel.poll(ctx, "en", None, "sig") == ("", SKIP, SKIP, "sig")


def test_a_task_file_with_a_missing_field_is_refused_before_a_job_starts(ctx, tmp_path):
    missing = tmp_path / "quiz.yaml"
    missing.write_text("task: quiz\ndataset_path: json\ntest_split: test\noutput_type: multiple_choice\n",
                       encoding="utf-8")
    said = start(ctx, other=str(missing))
    assert said.startswith(f"Cannot run benchmarks: Task file {missing} has no dataset_kwargs.data_files"), said
    assert "缺少 dataset_kwargs.data_files" in start(ctx, "zh", other=str(missing))
    assert not (ctx.workspace.runs_dir / "run-a" / "eval" / "benchmark-progress.json").exists()


def _finished(ctx, run_id: str):
    def ended():
        out = benchmark_panel.poll(ctx, "en", run_id, "")
        return out if out[0] and 'id="bench-running"' not in out[0] else None

    return wait_for(ended, "the benchmark job to end")


@pytest.mark.usefixtures("starts_processes")
def test_a_job_that_fails_says_why_in_both_languages(ctx, tmp_path):
    gone = copy_run(ctx.workspace.runs_dir / "run-a", ctx.workspace, "run-gone")
    config = yaml.safe_load((gone / "config.yaml").read_text(encoding="utf-8"))
    config["model_name_or_path"] = str(tmp_path / "deleted-model")
    (gone / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    assert start(ctx, current="run-gone").startswith("Benchmarks started in the background")
    bar = _finished(ctx, "run-gone")[0]
    assert 'id="bench-failed"' in bar and "The base model of run run-gone is gone" in bar, bar
    assert "运行 run-gone 的基座模型已不存在" in benchmark_panel.poll(ctx, "zh", "run-gone", "")[0]


@pytest.mark.usefixtures("starts_processes")
def test_a_benchmark_runs_in_the_background_and_is_drawn(ctx):

    said = start(ctx, checkpoints=["base", "final"], bundled=["studio_facts_choice", "studio_facts_answer"])
    assert said.startswith("Benchmarks started in the background (pid "), said
    bar, table, figure, signature = _finished(ctx, "run-a")
    assert 'id="bench-done"' in bar, bar
    assert list(table["checkpoint"]) == ["base", "final"] and list(table["step"]) == [0, 16]
    assert {"studio_facts_choice acc", "studio_facts_answer exact_match"} <= set(table.columns)
    assert figure is not None and len(figure.data) == 2  # one line per task's primary metric
    assert benchmark_panel.poll(ctx, "en", "run-a", signature)[1:3] == (SKIP, SKIP)  # unchanged: not redrawn
    assert ctx.saved()["run_id"] == "run-a"
