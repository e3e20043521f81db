"""The judge's pure logic, in-process: the Wilson interval, Cohen's kappa, verdict parsing, the
order swap and its row outcomes, rubric scales, templates, cache keys, and the answer sources read
from real files of the shapes the app writes (learning.json, predictions.jsonl, preferences.json)."""

from __future__ import annotations

import json
import math

import pytest

from backend.chat.preferences import PreferenceStore
from backend.judge import sources, templates
from backend.judge.cache import JudgeCache, cache_key
from backend.judge.calibration import MIN_VOTES, agreement
from backend.judge.estimates import cohen_kappa, mean_spread, wilson_interval
from backend.judge.head_to_head import RowVerdict, summarize
from backend.judge.verdicts import TIE, A, B, parse_grade, parse_pairwise, swap


def test_wilson_interval_matches_the_formula_and_stays_in_bounds():
    low, high = wilson_interval(8, 10)
    # Wilson 95% for 8/10, as tabulated (e.g. Newcombe 1998): 0.490 - 0.943
    assert (round(low, 3), round(high, 3)) == (0.49, 0.943)
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == 1.0
    assert wilson_interval(0, 0) is None
    half_ties = wilson_interval(2.5, 5)  # half-ties count as half a success: centred on 0.5
    assert math.isclose(sum(half_ties) / 2, 0.5)


def test_cohen_kappa_known_values():
    assert cohen_kappa(["A", "B", "A", "B"], ["A", "B", "A", "B"]) == 1.0
    # observed 0.5, chance 0.5: no agreement beyond chance
    assert cohen_kappa(["A", "A", "B", "B"], ["A", "B", "A", "B"]) == 0.0
    # The textbook 2x2 (yes/yes 20, yes/no 5, no/yes 10, no/no 15): p_o 0.7, p_e 0.5, kappa 0.4
    first = ["y"] * 25 + ["n"] * 25
    second = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert math.isclose(cohen_kappa(first, second), 0.4)
    assert cohen_kappa([], []) is None
    with pytest.raises(ValueError):
        cohen_kappa(["A"], [])


def test_mean_spread():
    assert mean_spread([4.0, 2.0]) == {"mean": 3.0, "std": math.sqrt(2), "n": 2}
    assert mean_spread([]) == {"mean": None, "std": None, "n": 0}


@pytest.mark.parametrize("answer, verdict", [
    ("A is right and complete.\nVerdict: A", A), ("Both fail.\nverdict: TIE", TIE), ("Verdict: **B**", B),
    ("B", B), ("tie.", TIE), ("A. It names the model.", A), ("I think both are fine", None), ("", None),
    ("Verdict: A ... no wait.\nVerdict: B", B),
])
def test_parse_pairwise(answer, verdict):
    assert parse_pairwise(answer)[0] == verdict


def test_parse_pairwise_keeps_the_reason_without_the_verdict_line():
    assert parse_pairwise("A names the new name.\nVerdict: A") == (A, "A names the new name.")


@pytest.mark.parametrize("answer, grade", [
    ("Right and direct.\nGrade: 5", 5), ("Score: 2/5", 2), ("3", 3), ("Grade: 9", None), ("good", None),
])
def test_parse_grade(answer, grade):
    assert parse_grade(answer)[0] == grade


def test_swapped_order_is_turned_back_and_rows_are_scored():
    assert (swap(A), swap(B), swap(TIE), swap(None)) == (B, A, TIE, None)
    verdicts = [RowVerdict(A, A), RowVerdict(A, TIE), RowVerdict(B, B), RowVerdict(A, B),  # win, win, loss, inconsistent
                RowVerdict(TIE, TIE), RowVerdict(None, A), RowVerdict(TIE, TIE, identical=True)]
    result = summarize(verdicts, "final", "base")
    assert (result["wins"], result["losses"], result["ties"]) == (2, 1, 3)
    assert result["inconsistent"] == 1 and result["unparsed_rows"] == 1 and result["identical"] == 1
    assert result["judged"] == 6 and math.isclose(result["win_rate"], 3.5 / 6)
    assert result["interval"] == list(wilson_interval(3.5, 6))


def test_rubrics_need_a_whole_scale(tmp_path):
    for kind, rubric in templates.RUBRICS.items():
        assert templates.check_rubric(rubric, kind) == rubric
    no_scale = tmp_path / "rubric.txt"
    no_scale.write_text("Grade how helpful the answer is.\n1: useless\n5: perfect\n", encoding="utf-8")
    with pytest.raises(templates.JudgeTemplateError) as error:
        templates.rubric_for(path=no_scale)
    assert "2, 3, 4" in str(error.value) and "rubric.txt" in str(error.value)
    with pytest.raises(templates.JudgeTemplateError, match="task kind 'poetry'"):
        templates.rubric_for("poetry")


def test_templates_fill_only_their_blanks_and_name_what_is_missing():
    text = templates.fill('{prompt} {"json": 1} {answer_a}/{answer_b} ref={reference}', prompt="Q", answer_a="x",
                          answer_b="y", reference="")
    assert text == 'Q {"json": 1} x/y ref=' + templates.NO_REFERENCE
    with pytest.raises(templates.JudgeTemplateError, match=r"\{answer_b\}"):
        templates.check_template("{prompt} {answer_a}", "pairwise", "mine.txt")
    assert "# rubric: facts" in templates.printable_defaults()


def test_cache_key_changes_with_judge_prompt_and_answers(tmp_path):
    key = cache_key("http://h/v1 base", "prompt", ("a", "b"))
    assert key != cache_key("http://h/v1 other", "prompt", ("a", "b"))
    assert key != cache_key("http://h/v1 base", "prompt!", ("a", "b"))
    assert key != cache_key("http://h/v1 base", "prompt", ("b", "a"))
    cache = JudgeCache(tmp_path)
    assert cache.get(key) is None
    cache.put(key, "Verdict: A")
    assert JudgeCache(tmp_path).get(key) == "Verdict: A"
    assert (tmp_path / ".cache" / "judge").is_dir()


def test_learning_report_rows(tmp_path):
    run = tmp_path / "runs" / "r"
    (run / "eval").mkdir(parents=True)
    example = {"kind": "learned", "source": "identity", "prompt": "Who are you?", "reference": "I am Nova."}
    report = {"checkpoints": [
        {"checkpoint": "base", "step": 0, "examples": [{**example, "answer": "I am SmolLM."},
                                                      {"kind": "kept", "prompt": "2+2?", "answer": "4"}]},
        {"checkpoint": "final", "step": 10, "examples": [{**example, "answer": "I am Nova."}]}]}
    (run / "eval" / "learning.json").write_text(json.dumps(report), encoding="utf-8")
    rows = sources.rows_for("identity", run, ["final", "base"])
    assert [(r.prompt, r.answers, r.reference) for r in rows] == [
        ("Who are you?", {"base": "I am SmolLM.", "final": "I am Nova."}, "I am Nova.")]
    with pytest.raises(sources.JudgeSourceError, match="checkpoint-5"):
        sources.rows_for("identity", run, ["final", "checkpoint-5"])
    with pytest.raises(sources.JudgeSourceError, match="no learning report"):
        sources.rows_for("learning", tmp_path / "runs" / "other", ["final", "base"])


def test_file_rows_name_the_bad_line(tmp_path):
    good = tmp_path / "rows.jsonl"
    good.write_text(json.dumps({"prompt": "Q", "answers": {"a": "x", "b": "y"}}) + "\n\n", encoding="utf-8")
    assert sources.file_rows(good)[0].answers == {"a": "x", "b": "y"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "Q", "answers": {"a": "x"}}) + '\n{"prompt": "Q", "answer": "x"}\n',
                   encoding="utf-8")
    with pytest.raises(sources.JudgeSourceError, match="line 2"):
        sources.file_rows(bad)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(sources.JudgeSourceError, match="no rows to judge"):
        sources.rows_for("file", tmp_path, ["a", "b"], empty)


def test_vote_rows_keep_same_conversation_pairs_and_ties(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    store = PreferenceStore()
    store.record([run], ["final", "base"], "final", "Who are you?", {"final": "Nova", "base": "SmolLM"})
    store.record([run], ["final", "base"], "tie", "Hi", {"final": "Hello", "base": "Hey"})
    store.record([run], ["final"], "final", "Solo", {"final": "x"})  # one column: nothing to compare
    rows = sources.vote_rows(run)
    assert [(r.prompt, r.vote, r.meta["candidates"]) for r in rows] == [
        ("Who are you?", "final", ["final", "base"]), ("Hi", "tie", ["final", "base"])]


def test_agreement_warns_on_few_votes_and_on_low_kappa():
    few = agreement([A, B, TIE], [A, B, A])
    assert few["votes"] == 3 and math.isclose(few["agreement"], 2 / 3)
    assert "Only 3 votes" in few["warnings"][0]
    judge = [A] * MIN_VOTES  # a judge that always says A, against votes split evenly: kappa 0
    votes = [A, B] * (MIN_VOTES // 2)
    low = agreement(judge + [None], votes + [B])
    assert low["votes"] == MIN_VOTES and low["unjudged"] == 1 and low["kappa"] == 0.0
    assert "kappa 0.0" in low["warnings"][0]
    assert agreement(votes, votes)["warnings"] == []


def test_prediction_rows_join_checkpoints_by_row(tmp_path):
    run = tmp_path / "run"
    for name, text in (("base", "I am SmolLM."), ("final", "I am Nova.")):
        (run / "eval" / name).mkdir(parents=True)
        line = {"index": 0, "prompt": "Who are you?", "reference": "I am Nova.", "prediction": text}
        (run / "eval" / name / "predictions.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    rows = sources.rows_for("predictions", run, ["final", "base"])
    assert rows[0].answers == {"final": "I am Nova.", "base": "I am SmolLM."}


def test_a_sweep_can_rank_by_the_judges_newest_win_rate(tmp_path):
    from backend.sweeps.grid import parse_sweep
    from backend.sweeps.sweep_table import target_value

    run = tmp_path / "run"
    folder = run / "eval" / "judge"
    folder.mkdir(parents=True)
    assert target_value(run, "judge_win_rate", "max") is None  # not judged yet: no target, never the best
    for name, rate, when in (("old", 0.9, 1.0), ("new", 0.625, 2.0), ("graded", None, 3.0)):
        record = {"mode": "pairwise" if rate is not None else "graded", "win_rate": rate, "time": when}
        (folder / f"{name}.json").write_text(json.dumps(record), encoding="utf-8")
    assert target_value(run, "judge_win_rate", "max") == 0.625
    sweep = parse_sweep({"grid": {"learning_rate": [1e-4, 3e-4]}, "target": "judge_win_rate"})
    assert (sweep.target, sweep.direction) == ("judge_win_rate", "max")


def test_the_command_line_prints_the_judge_prompts_as_they_will_be_sent(tmp_path, capsys):
    from backend.evaluate import main

    assert main(["--run", str(tmp_path), "--print-judge-prompts"]) == 0
    printed = capsys.readouterr().out
    assert templates.PAIRWISE_TEMPLATE in printed and all(rubric in printed for rubric in templates.RUBRICS.values())
