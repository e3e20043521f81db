"""The scorer library (backend/scoring/): every kind on real answers, English and Chinese, every bad
spec refused with its sentence (in English and in Chinese), and the three callers scoring with it:
GRPO's reward presets give the scorer's values, the learning rule keeps its verdicts."""

from __future__ import annotations

import json

import pytest
from rouge_score import rouge_scorer

from backend.config import RunConfig
from backend.config_policy import ConfigError
from backend.messages import render_message
from backend.scoring.answer_rule import judge_answer
from backend.scoring.errors import ScorerError
from backend.scoring.items import Item
from backend.scoring.scorer_specs import parse_scorer, parse_scorers, specs_from_argument, specs_from_text
from backend.scoring.tally import score_rows, summarise
from backend.training.rewards import build_preset, reward_functions
from ui.texts.message_texts import ZH


def passes(spec: dict, text: str, reference: str | None = None, **item) -> bool:
    return parse_scorer(spec).score(Item(text, reference, **item)).passed


def value(spec: dict, text: str, reference: str | None = None, **item) -> float:
    return parse_scorer(spec).score(Item(text, reference, **item)).value


# --- every kind on real answers ---------------------------------------------------------------------

def test_exact_match_normalises_numbers_and_extracts_the_answer():
    exact = {"kind": "exact_match"}
    assert passes(exact, "<think>600 + 400</think><answer>1,000</answer>", "1000")
    assert passes(exact, "The sum is 57.", "57")  # the last number, where the reference is a number
    assert passes(exact, "  Paris. ", "paris")
    assert passes(exact, "巴黎", "巴黎") and not passes(exact, "巴黎。", "北京")
    assert not passes(exact, "12", "13")
    assert not passes(exact, "anything", None) and not passes(exact, "anything", "  ")  # no reference: 0
    spaces = {"kind": "exact_match", "normalise": "spaces"}
    assert passes(spaces, " The capital  of France is Paris.\n", "The capital of France is Paris.")
    assert not passes(spaces, "the capital of France is Paris", "The capital of France is Paris.")
    assert not passes(spaces, "The sum is 57.", "57")  # the whole answer, not its last number


def test_contains_and_not_contains_with_chinese():
    assert passes({"kind": "contains", "text": "Paris"}, "The capital is Paris.")
    assert not passes({"kind": "contains", "text": "paris"}, "The capital is Paris.")
    assert passes({"kind": "contains", "text": "paris", "ignore_case": True}, "The capital is Paris.")
    assert passes({"kind": "contains", "text": "巴黎"}, "法国的首都是巴黎。")
    assert passes({"kind": "not_contains", "text": "抱歉"}, "法国的首都是巴黎。")
    assert not passes({"kind": "not_contains", "text": "抱歉"}, "抱歉，我不知道。")
    assert passes({"kind": "contains", "text": 1987}, "Founded in 1987.")  # a number is its spelling


def test_regex_searches_and_format_matches_the_whole_answer():
    assert passes({"kind": "regex", "pattern": r"\d{4}年"}, "公司成立于1987年。")
    assert not passes({"kind": "regex", "pattern": r"^\d+$"}, "about 12")
    thought = "<think>2 + 3 = 5\nso</think>\n<answer>5</answer>"
    assert passes({"kind": "format"}, thought) and not passes({"kind": "format"}, f"Sure! {thought}")
    assert passes({"kind": "format", "pattern": r"\d+"}, " 42 ") and not passes({"kind": "format", "pattern": r"\d+"},
                                                                                "42 apples")


def test_json_parses_has_keys_and_validates_against_a_schema():
    answer = '```json\n{"name": "Mara Lind", "founded": 1987}\n```'
    assert passes({"kind": "json"}, answer) and passes({"kind": "json"}, "[1, 2]")
    assert not passes({"kind": "json"}, "name: Mara Lind")
    assert passes({"kind": "json", "keys": ["name", "founded"]}, answer)
    assert not passes({"kind": "json", "keys": ["name", "city"]}, answer)
    assert passes({"kind": "json", "keys": ["城市"]}, '{"城市": "北京"}')
    schema = {"type": "object", "required": ["founded"], "properties": {"founded": {"type": "integer"}}}
    assert passes({"kind": "json", "schema": schema}, answer)
    assert not passes({"kind": "json", "schema": schema}, '{"founded": "1987"}')


def test_number_within_a_tolerance():
    assert passes({"kind": "number"}, "The answer is 3.", "3")
    assert passes({"kind": "number", "tolerance": 0.01}, "约 3.14159", "3.14")
    assert not passes({"kind": "number", "tolerance": 0.001}, "about 3.14159", "3.14")
    assert passes({"kind": "number", "value": 1000}, "<answer>1,000</answer> (not 999)")
    assert passes({"kind": "number", "tolerance": 0.05, "relative": True}, "it costs 1040", "1000")
    assert not passes({"kind": "number", "tolerance": 0.01, "relative": True}, "it costs 1040", "1000")
    assert passes({"kind": "number"}, "0.30000000000000004", "0.3")
    assert not passes({"kind": "number"}, "no number here", "3") and not passes({"kind": "number"}, "3", "三")
    assert parse_scorer({"kind": "number", "value": 2}).needs_reference is False


def test_length_counts_tokens_with_the_callers_counter():
    spec = {"kind": "length", "min": 2, "max": 4}
    assert [value(spec, text, count_tokens=len) for text in ("ab", "abcdef", "a", "abcdefgh")] == [1.0, 0.5, 0.5, 0.0]
    assert not passes(spec, "abcdef", count_tokens=len)  # near the bound: a reward above 0, but not a pass
    words = lambda text: len(text.split())  # noqa: E731 (a counter such as a tokenizer's)
    assert passes({"kind": "length", "max": 3}, "one two three", count_tokens=words)
    assert passes({"kind": "length", "min": 5}, "x", tokens=5)  # known token count wins over the counter
    with pytest.raises(ValueError, match="needs the answer's tokens"):
        parse_scorer(spec).score(Item("ab"))


def test_rouge_equals_rouge_score_on_real_rows(shared_data):
    """The project's ROUGE (no nltk import) gives rouge-score 0.1.2's F-measures, with the same tokenizer,
    on answers against other rows' answers in English and Chinese, and on empty and one-word texts."""
    from backend.scoring.cjk_tokens import MixedTokenizer
    from backend.scoring.overlap import ROUGE_TYPES, rouge_scores

    texts = []
    for name in ("alpaca_en_demo.json", "alpaca_zh_demo.json"):
        rows = json.loads((shared_data / name).read_text(encoding="utf-8"))[:40]
        texts += [row["output"][:400] for row in rows]
    pairs = [(a, b) for a, b in zip(texts, texts[1:] + texts[:1], strict=True)]
    pairs += [(t, t) for t in texts[:5]] + [("", "x"), ("x", ""), ("", ""), ("Paris", "Paris."), ("a a a", "a")]
    oracle = rouge_scorer.RougeScorer(list(ROUGE_TYPES), tokenizer=MixedTokenizer())
    for prediction, reference in pairs:
        expected = {k: v.fmeasure for k, v in oracle.score(reference, prediction).items()}
        assert rouge_scores(prediction, reference) == pytest.approx(expected, abs=1e-12), (prediction, reference)


def test_rouge_l_and_bleu_count_chinese_characters():
    from sacrebleu.metrics import BLEU

    english = rouge_scorer.RougeScorer(["rougeL"]).score("Water boils at 100 degrees.", "Water boils at 90 degrees.")
    assert value({"kind": "rouge_l"}, "Water boils at 90 degrees.", "Water boils at 100 degrees.") == pytest.approx(
        english["rougeL"].fmeasure)
    assert value({"kind": "rouge_l"}, "北京是中国的首都。", "北京是中国的首都。") == pytest.approx(1.0)
    # 水在一百度沸腾 vs 水在一百摄氏度时沸腾: LCS 7 of 7 and 10 characters
    assert value({"kind": "rouge_l"}, "水在一百摄氏度时沸腾。", "水在一百度沸腾。") == pytest.approx(2 * 7 / 17)
    assert passes({"kind": "rouge_l", "threshold": 0.8}, "水在一百摄氏度时沸腾。", "水在一百度沸腾。")
    assert not passes({"kind": "rouge_l", "threshold": 0.9}, "水在一百摄氏度时沸腾。", "水在一百度沸腾。")
    direct = BLEU(tokenize="zh", effective_order=True).sentence_score("一个星期有七天", ["一周有七天。"]).score
    assert value({"kind": "bleu"}, "一个星期有七天", "一周有七天。") == pytest.approx(direct / 100) and direct > 0
    assert passes({"kind": "bleu"}, "The cat sat on the mat.", "The cat sat on the mat.")


def test_right_answer_is_the_learning_rule():
    faq = "Blue Harbor Books opened in 1987 and now has 14 stores; Mara Lind founded it."
    cases = [("Mara Lind founded Blue Harbor Books in 1987; it has 14 stores.", faq, ()),
             ("Blue Harbor Books opened in 1989 and has 14 stores; Mara Lind founded it.", faq, ()),
             ('{"name": "Mara", "city": "Oslo"}', '{"name": "Ada", "city": "Rome"}', ()),
             ('{"name": "Mara"}', '{"name": "Ada", "city": "Rome"}', ()),
             ("我是 Nova，由 Lab 开发。", "我是 Nova，由 Lab 开发的助手。", ("Nova", "Lab")),
             ("今天天气很好，我们去公园散步吧。", "今天天气很好，我们去公园散步。", ())]
    scorer = parse_scorer({"kind": "right_answer"})
    verdicts = [scorer.score(Item(answer, reference, identity)).passed for answer, reference, identity in cases]
    assert verdicts == [judge_answer(a, r, i).right for a, r, i in cases] == [True, False, True, False, True, True]


# --- specs as data and as text ------------------------------------------------------------------------

def test_specs_are_named_and_parsed_once_from_yaml_or_json(tmp_path):
    text = "- {kind: contains, text: 巴黎}\n- {kind: contains, text: Paris}\n- {kind: rouge_l, name: overlap}\n"
    scorers = parse_scorers(specs_from_text(text))
    assert [s.name for s in scorers] == ["contains", "contains_2", "overlap"]
    as_json = json.dumps({"scorers": [{"kind": "number", "tolerance": 0.01}]})
    assert specs_from_text(as_json) == [{"kind": "number", "tolerance": 0.01}] and specs_from_text("  ") == []
    path = tmp_path / "scorers.yaml"
    path.write_text("scorers:\n  - kind: json\n    keys: [name]\n", encoding="utf-8")
    assert specs_from_argument(str(path)) == [{"kind": "json", "keys": ["name"]}]
    rows = score_rows(scorers, ["法国的首都是巴黎。", "Paris"], ["巴黎", "Paris"])
    assert [row["contains"]["pass"] for row in rows] == [True, False]
    summary = summarise(scorers, rows)
    assert summary["contains"]["pass"] == 0.5 and summary["contains_2"]["pass"] == 0.5
    assert summary["overlap"] == {"kind": "rouge_l", "spec": {"kind": "rouge_l", "name": "overlap"}, "n": 2,
                                  "pass": 0.5, "mean": pytest.approx(summary["overlap"]["mean"])}


BAD_SPECS = [
    ({"kind": "exact"}, "scorer 1: kind 'exact' is not one of: exact_match, format, length, contains"),
    ("contains", "scorer 1 should be a mapping such as {kind: contains, text: Paris} (got 'contains')"),
    ({"kind": "contains"}, "scorer 1 (contains) needs a text to look for: add text: ... to it."),
    ({"kind": "contains", "text": "x", "pattern": "y"}, "scorer 1 (contains) has pattern, which it does not use; "
                                                        "it takes name, text, ignore_case."),
    ({"kind": "regex", "pattern": "(<answer>"}, "scorer 1 (regex): pattern '(<answer>' is not a valid regular "
                                                "expression"),
    ({"kind": "regex"}, "scorer 1 (regex) needs a pattern to look for"),
    ({"kind": "json", "schema": {"type": "objekt"}}, "scorer 1 (json): the schema is not valid JSON Schema: 'objekt' "
                                                     "is not valid"),
    ({"kind": "json", "schema": "object"}, "schema should be a JSON Schema object"),
    ({"kind": "json", "keys": "name"}, "keys should be a list of key names such as [name, age] (got 'name')"),
    ({"kind": "number", "tolerance": -0.1}, "scorer 1 (number): tolerance -0.1 should be a number of 0 or more"),
    ({"kind": "number", "value": "ten"}, "value 'ten' should be a number"),
    ({"kind": "number", "relative": "yes"}, "relative 'yes' should be true or false"),
    ({"kind": "length", "min": 9, "max": 3}, "give min and / or max as whole numbers of tokens, min not above max"),
    ({"kind": "length"}, "(got min None, max None)"),
    ({"kind": "rouge_l", "threshold": 50}, "scorer 1 (rouge_l): threshold 50 should be a number from 0 to 1"),
    ({"kind": "exact_match", "normalise": "numbers"}, "normalise 'numbers' is not one of: answer, spaces"),
]


@pytest.mark.parametrize("spec, sentence", BAD_SPECS)
def test_a_bad_spec_is_one_sentence_in_english_and_chinese(spec, sentence):
    with pytest.raises(ScorerError) as caught:
        parse_scorer(spec)
    assert sentence in str(caught.value)
    chinese = render_message(caught.value.catalogued, ZH)
    assert "第 1 个评分器" in chinese and chinese != str(caught.value)


@pytest.mark.parametrize("text, sentence", [
    ("[{kind: contains, text: x", "The scorers are not valid YAML or JSON"),
    ("kind: contains", "The scorers should be a list of mappings"),
    ("- {kind: rouge_l}\n- {kind: bleu, name: rouge_l}", "Two scorers are named 'rouge_l'"),
    ("- {kind: bleu, name: ''}", "scorer 1: name '' should be a text that is not empty"),
    ("- {kind: bleu}\n- {kind: number, tolerance: -1}", "scorer 2 (number): tolerance -1"),
])
def test_bad_scorer_text_is_one_sentence(text, sentence):
    with pytest.raises(ScorerError, match=None) as caught:
        specs_from_text(text)
    assert sentence in str(caught.value)


def test_a_missing_scorers_file_is_named(tmp_path):
    with pytest.raises(ScorerError, match=r"Scorers file .*nowhere.yaml cannot be read"):
        specs_from_argument(str(tmp_path / "nowhere.yaml"))


# --- the callers --------------------------------------------------------------------------------------

COMPLETIONS = ["<answer>1,000</answer>", "The sum is 57.", "<think>x</think> <answer>12</answer>", "12",
               "抱歉，我算不出来。", "<think>想一想</think><answer>五</answer>"]
ANSWERS = ["1000", "57", "12", "13", "5", "五"]


def test_grpo_rewards_equal_the_scorers_on_the_same_completions():
    config = RunConfig().with_overrides([
        "stage=grpo", "rewards=[{kind: exact_match}, {kind: format}, {kind: length, min: 4, max: 12, weight: 0.5},"
        " {kind: contains, text: answer}, {kind: not_contains, text: 抱歉}]"])
    functions, weights = reward_functions(config, len)
    assert [f.__name__ for f in functions] == ["exact_match", "format", "length", "contains", "not_contains"]
    assert weights == [1.0, 1.0, 0.5, 1.0, 1.0]
    conversational = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]
    for function, preset in zip(functions, config.rewards):
        scorer = parse_scorer({k: v for k, v in preset.items() if k != "weight"})
        expected = [scorer.score(Item(c, a, count_tokens=len)).value for c, a in zip(COMPLETIONS, ANSWERS)]
        assert function(None, conversational, answer=ANSWERS) == expected, preset
    assert functions[0](None, COMPLETIONS, answer=ANSWERS) == [1.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    ids = [[0] * 3, [0] * 4, [0] * 24, [0] * 12, [0] * 8, [0] * 30]  # TRL's completion ids: their lengths count
    assert functions[2](None, COMPLETIONS, completion_ids=ids) == [0.75, 1.0, 0.0, 1.0, 1.0, 0.0]


def test_the_rouge_l_reward_gives_partial_credit_that_tells_wrong_answers_apart():
    (function,), weights = reward_functions(RunConfig().with_overrides(["stage=grpo", "rewards=[{kind: rouge_l}]"]), len)
    assert function.__name__ == "rouge_l" and weights == [1.0]
    reference = "The capital of France is Paris."
    values = function(None, [[{"role": "assistant", "content": c}] for c in
                             (reference, "Paris is the capital.", "I do not know.", "巴黎。")],
                      answer=[reference, reference, reference, "法国的首都是巴黎。"])
    assert values[0] == 1.0 and 0 < values[1] < 1 and values[2] == 0.0 and 0 < values[3] < 1


def test_grpo_presets_are_checked_by_the_scorer_library():
    cases = [("rewards=[{kind: format, pattern: '<answer>('}]", "rewards entry 1 (format): pattern '<answer>(' is "
                                                                 "not a valid regular expression"),
             ("rewards=[{kind: exact_match}, {kind: contains}]", "rewards entry 2 (contains) needs a text"),
             ("rewards=[{kind: json}]", "rewards entry 1: kind 'json' is not one of: exact_match, format, length, "
                                        "contains, not_contains, rouge_l."),
             ("rewards=[{kind: length, max: 8, name: short}]", "has name, which it does not use; it takes weight, "
                                                               "min, max"),
             ("rewards=[{kind: length, max: 8, weight: heavy}]", "weight 'heavy' should be a number")]
    for setting, sentence in cases:
        with pytest.raises(ConfigError) as caught:
            RunConfig().with_overrides(["stage=grpo", setting])
        assert sentence in str(caught.value), str(caught.value)
        assert "rewards 第" in render_message(caught.value.catalogued, ZH)


def test_a_reward_without_a_reference_scores_zero():
    exact = build_preset({"kind": "exact_match"}, "exact_match", len)
    assert exact(None, ["5", "5"]) == [0.0, 0.0]
    assert exact(None, ["5", "5"], answer=["5", None]) == [1.0, 0.0]
