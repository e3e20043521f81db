"""Overlap with the reference: ROUGE-1/2/L F-measures and BLEU, per row (the rouge_l and bleu
scorers, Evaluate's per-row columns) and per set (Evaluate's corpus BLEU). Values are 0-1 here;
Evaluate shows them on a 0-100 scale. Tokenised as cjk_tokens.py says, so Chinese counts.

rouge-score and sacrebleu are imported where they are used: rouge-score pulls in nltk and scipy
(1.6 s of CPU), which every refusal of a command line and the app's start would pay, since this
package sits under the config checks.
"""

from __future__ import annotations

import functools

from backend.messages import Message
from backend.scoring.cjk_tokens import MixedTokenizer, bleu_tokenizer
from backend.scoring.errors import threshold_field
from backend.scoring.items import Item, Score

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
ROUGE_RIGHT = 0.5  # ROUGE-L F (0-1) that counts a free-text answer as right (the learning report's rule)
BLEU_RIGHT = 0.3  # sentence BLEU (0-1) the bleu scorer passes at unless a threshold is given


@functools.cache
def _rouge(types: tuple[str, ...]):
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(list(types), tokenizer=MixedTokenizer())


def rouge_scores(prediction: str, reference: str, types: tuple[str, ...] = ROUGE_TYPES) -> dict[str, float]:
    """ROUGE F-measures (0-1) of one answer against its reference."""
    scores = _rouge(types).score(reference, prediction)  # (target, prediction)
    return {name: scores[name].fmeasure for name in types}


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
