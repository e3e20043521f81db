"""Metric values against independent computations (sacrebleu / rouge-score called directly)."""

from __future__ import annotations

from collections import Counter

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from backend.evaluation.text_scores import corpus_scores, row_scores

EN_REFS = [
    "The capital of France is Paris.",
    "Water boils at 100 degrees Celsius at sea level.",
    "Photosynthesis turns light into chemical energy.",
    "Seven days make a week.",
]
EN_PREDS = [
    "The capital of France is Paris.",
    "Water boils at 90 degrees at sea level.",
    "Plants turn light into sugar.",
    "A week has seven days",
]
ZH_REFS = ["北京是中国的首都。", "水在一百度沸腾。", "一周有七天。"]
ZH_PREDS = ["北京是中国的首都。", "水在一百摄氏度时沸腾。", "一个星期有七天"]


def _lcs(a: list, b: list) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def _f1(overlap: int, pred_len: int, ref_len: int) -> float:
    if not overlap:
        return 0.0
    p, r = overlap / pred_len, overlap / ref_len
    return 2 * p * r / (p + r)


def _ngrams(tokens: list, n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def test_english_scores_equal_sacrebleu_and_rouge_score():
    scores = corpus_scores(EN_PREDS, EN_REFS)
    assert scores["bleu_tokenize"] == "13a"
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(EN_PREDS, [EN_REFS], tokenize="13a").score)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"])  # rouge-score's own tokenizer
    direct = [scorer.score(r, p) for p, r in zip(EN_PREDS, EN_REFS)]
    for name in ("rouge1", "rouge2", "rougeL"):
        expected = 100 * sum(d[name].fmeasure for d in direct) / len(direct)
        assert scores[name] == pytest.approx(expected)
    assert scores["exact_match"] == pytest.approx(25.0)
    assert 0 < scores["rougeL"] < 100


def test_chinese_scores_count_characters():
    scores = corpus_scores(ZH_PREDS, ZH_REFS)
    assert scores["bleu_tokenize"] == "zh"
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(ZH_PREDS, [ZH_REFS], tokenize="zh").score)
    chars = [([c for c in p if c.isalnum()], [c for c in r if c.isalnum()]) for p, r in zip(ZH_PREDS, ZH_REFS)]
    r1 = [_f1(sum((_ngrams(p, 1) & _ngrams(r, 1)).values()), len(p), len(r)) for p, r in chars]
    r2 = [_f1(sum((_ngrams(p, 2) & _ngrams(r, 2)).values()), len(p) - 1, len(r) - 1) for p, r in chars]
    rl = [_f1(_lcs(p, r), len(p), len(r)) for p, r in chars]
    assert scores["rouge1"] == pytest.approx(100 * sum(r1) / 3)
    assert scores["rouge2"] == pytest.approx(100 * sum(r2) / 3)
    assert scores["rougeL"] == pytest.approx(100 * sum(rl) / 3)
    # The trap this guards against: rouge-score's default tokenizer scores Chinese 0.
    default = rouge_scorer.RougeScorer(["rougeL"]).score(ZH_REFS[0], ZH_PREDS[0])["rougeL"].fmeasure
    assert default == 0.0


def test_correct_chinese_answer_scores_full_marks():
    rows = row_scores(["猫坐在垫子上。"], ["猫坐在垫子上。"])
    assert rows[0]["rouge1"] == pytest.approx(100) and rows[0]["rougeL"] == pytest.approx(100)
    assert rows[0]["exact_match"] == 100.0


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="pair up"):
        corpus_scores(["a"], ["a", "b"])
