"""Overlap with the reference: ROUGE-1/2/L F-measures and BLEU, per row (the rouge_l and bleu
scorers, Evaluate's per-row columns) and per set (Evaluate's corpus BLEU). Values are 0-1 here;
Evaluate shows them on a 0-100 scale. Tokenised as cjk_tokens.py says, so Chinese counts.

ROUGE is computed here, as rouge-score 0.1.2 computes it (tests/test_scoring.py checks equal values on
English, Chinese and empty answers): importing rouge-score pulls in nltk and scipy, 1.6-2.6 s of CPU that
every worker that writes a learning report paid for a longest-common-subsequence table and n-gram counts.
sacrebleu is imported where it is used.
"""

from __future__ import annotations

import functools
from collections import Counter

from backend.messages import Message
from backend.scoring.cjk_tokens import MixedTokenizer, bleu_tokenizer
from backend.scoring.errors import threshold_field
from backend.scoring.items import Item, Score

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
ROUGE_RIGHT = 0.5  # ROUGE-L F (0-1) that counts a free-text answer as right (the learning report's rule)
BLEU_RIGHT = 0.3  # sentence BLEU (0-1) the bleu scorer passes at unless a threshold is given


_TOKENIZER = MixedTokenizer()


def _f_measure(matched: int, predicted: int, wanted: int) -> float:
    precision, recall = matched / max(predicted, 1), matched / max(wanted, 1)
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _ngram_f(target: list[str], prediction: list[str], n: int) -> float:
    """ROUGE-N: n-grams in common, each counted at most as often as the reference has it."""
    wanted = Counter(tuple(target[i:i + n]) for i in range(len(target) - n + 1))
    predicted = Counter(tuple(prediction[i:i + n]) for i in range(len(prediction) - n + 1))
    matched = sum(min(count, predicted[gram]) for gram, count in wanted.items())
    return _f_measure(matched, sum(predicted.values()), sum(wanted.values()))


def _lcs_f(target: list[str], prediction: list[str]) -> float:
    """ROUGE-L: the longest common subsequence, one row of the table at a time."""
    if not target or not prediction:
        return 0.0
    previous = [0] * (len(prediction) + 1)
    for word in target:
        row = [0]
        for j, other in enumerate(prediction, 1):
            row.append(previous[j - 1] + 1 if word == other else max(previous[j], row[j - 1]))
        previous = row
    return _f_measure(previous[-1], len(prediction), len(target))


def rouge_scores(prediction: str, reference: str, types: tuple[str, ...] = ROUGE_TYPES) -> dict[str, float]:
    """ROUGE F-measures (0-1) of one answer against its reference, by name (rouge1, rouge2, rougeL)."""
    target, predicted = _TOKENIZER.tokenize(reference), _TOKENIZER.tokenize(prediction)
    return {name: _lcs_f(target, predicted) if name == "rougeL" else _ngram_f(target, predicted, int(name[5:]))
            for name in types}


def rouge_l(prediction: str, reference: str) -> float:
    return rouge_scores(prediction, reference, ("rougeL",))["rougeL"]


@functools.cache
def _bleu(tokenize: str, sentence: bool):
    from sacrebleu.metrics import BLEU

    # A sentence has few 4-grams: effective order scores it on the n-gram orders it has.
    return BLEU(tokenize=tokenize, effective_order=sentence)


def sentence_bleu(prediction: str, reference: str) -> float:
    """sacrebleu's sentence BLEU (0-1), "zh" tokenized when the reference holds CJK text."""
    return _bleu(bleu_tokenizer([reference]), True).sentence_score(prediction, [reference]).score / 100


def corpus_bleu(predictions: list[str], references: list[str]) -> tuple[float, str]:
    """(sacrebleu's corpus BLEU on 0-100, the tokenizer it used) of a set."""
    tokenize = bleu_tokenizer(references)
    return _bleu(tokenize, False).corpus_score(predictions, [references]).score, tokenize


def build_rouge_l(spec: dict, where: Message):
    return _passing_at(rouge_l, threshold_field(spec, where, "rouge_l", ROUGE_RIGHT))


def build_bleu(spec: dict, where: Message):
    return _passing_at(sentence_bleu, threshold_field(spec, where, "bleu", BLEU_RIGHT))


def _passing_at(metric, threshold: float):
    """(a check whose value is `metric` against the reference and which passes at `threshold`, True: it
    needs a reference)."""
    def check(item: Item) -> Score:
        value = metric(item.text, str(item.reference))
        return Score(value, value >= threshold)
    return check, True
