"""The Evaluate tab's scorers box, through its handlers with the values a browser sends: a bad spec
is a sentence in the user's language and starts nothing; results scored with scorers (by the real
evaluator, in-process, on a real LoRA run of the demo model) show the share passing each scorer
per checkpoint in the results table."""

from __future__ import annotations

import json

import pytest

from backend.evaluation.evaluator import evaluate_run
from tests.eval_export_runs import evaluate_tab_context, one_torch_thread
from ui.tabs import evaluate

pytestmark = pytest.mark.usefixtures("one_torch_thread")
_ = one_torch_thread  # the fixture, imported for pytest to find


@pytest.fixture(scope="module")
def ctx(tmp_path_factory, demo_model_dir):
    return evaluate_tab_context(tmp_path_factory.mktemp("evaluate-scorers-tab"), demo_model_dir)


def start(ctx, lang: str, scorers: str) -> str:
    return evaluate.start_eval(ctx, lang, "run-a", ["base"], "split", None, 2, 8, scorers)


@pytest.mark.parametrize("typed, english, chinese", [
    ("- {kind: number, tolerance: -1}", "Cannot evaluate: scorer 1 (number): tolerance -1 should be a number of 0 or "
                                        "more", "无法评估：第 1 个评分器（number）：tolerance -1"),
    ("- {kind: contains}\n", "scorer 1 (contains) needs a text to look for", "需要要查找的 text"),
    ("- {kind: regex, pattern: '(x'}", "pattern '(x' is not a valid regular expression", "不是有效的正则表达式"),
    ("[{kind: json, schema: {type: objekt}}]", "the schema is not valid JSON Schema", "不是有效的 JSON Schema"),
    ("- {kind: bleu}\n- {kind: exakt}", "scorer 2: kind 'exakt' is not one of: exact_match", "第 2 个评分器"),
    ("[{kind: contains, text: x", "The scorers are not valid YAML or JSON", "不是有效的 YAML 或 JSON"),
    ("contains: Paris", "The scorers should be a list of mappings", "评分器设置应为映射的列表"),
    ("scorers.yaml", "The scorers should be a list of mappings such as", "当前为 'scorers.yaml'"),
])
def test_a_bad_scorer_is_a_sentence_in_both_languages_and_starts_nothing(ctx, typed, english, chinese):
    assert english in start(ctx, "en", typed)
    assert chinese in start(ctx, "zh", typed)
    assert not (ctx.workspace.runs_dir / "run-a" / "eval" / "progress.json").exists()


def test_the_results_table_shows_the_share_passing_each_scorer(ctx, tmp_path):
    data = tmp_path / "questions.jsonl"
    rows = [{"instruction": "What is 2 + 3?", "input": "", "output": "2 + 3 = 5."},
            {"instruction": "法国的首都是哪里？", "input": "", "output": "法国的首都是巴黎。"}]
    data.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    run_dir = ctx.workspace.runs_dir / "run-a"
    summary = evaluate_run(run_dir, ["base", "checkpoint-16"], data=data, max_new_tokens=8,
                           scorers="- {kind: not_contains, text: 抱歉}\n- {kind: length, max: 4, name: short}")
    _, table, _, _, _ = evaluate.redraw(ctx, "en", "run-a", False)
    assert list(table["checkpoint"]) == ["base", "checkpoint-16"]
    for index, name in enumerate(("base", "checkpoint-16")):
        shares = summary["results"][name]["scorers"]
        assert table["✓ not_contains"][index] == f"{shares['not_contains']['pass']:.0%}"
        assert table["✓ short"][index] == f"{shares['short']['pass']:.0%}"
    assert evaluate.scorer_columns({"scorers": {"rouge_l": {"pass": None}}}) == {"✓ rouge_l": "–"}
    assert evaluate.scorer_columns({"eval_loss": 1.0}) == {}
