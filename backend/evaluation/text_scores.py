"""Evaluate's text columns for generated answers: BLEU, ROUGE-1/2/L and exact match, on a 0-100
scale, from the scorer library (backend/scoring/: overlap.py for ROUGE and BLEU, with the Chinese
tokenisation cjk_tokens.py explains; text_match.py for exact match).

Exact match here is the whole answer with surrounding and repeated whitespace ignored (the
exact_match scorer's `normalise: spaces`), so a column of an old metrics.json means what it meant;
a user who wants GRPO's answer extraction picks the exact_match scorer (scorers.py).
"""

from __future__ import annotations

from backend.scoring.cjk_tokens import ROUGE_TOKENIZATION
from backend.scoring.overlap import ROUGE_TYPES, corpus_bleu, rouge_scores
from backend.scoring.text_match import same_text

METRIC_NAMES = ("bleu", "rouge1", "rouge2", "rougeL", "exact_match")


def row_scores(predictions: list[str], references: list[str]) -> list[dict]:
    """Per-row ROUGE F-measures and exact match (0-100), in the order given."""
    _check_lengths(predictions, references)
    rows = []
    for prediction, reference in zip(predictions, references):
        row = {name: 100.0 * value for name, value in rouge_scores(prediction, reference).items()}
        row["exact_match"] = 100.0 if same_text(prediction, reference) else 0.0
        rows.append(row)
    return rows


def corpus_scores(predictions: list[str], references: list[str]) -> dict:
    """Set-level scores: corpus BLEU, mean ROUGE F-measures, exact-match rate."""
    _check_lengths(predictions, references)
    if not references:
        return {}
    bleu, tokenize = corpus_bleu(predictions, references)
    rows = row_scores(predictions, references)
    result = {"bleu": bleu}
    for name in (*ROUGE_TYPES, "exact_match"):
        result[name] = sum(r[name] for r in rows) / len(rows)
    result["bleu_tokenize"] = tokenize
    result["rouge_tokenization"] = ROUGE_TOKENIZATION
    return result


def _check_lengths(predictions: list[str], references: list[str]) -> None:
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references: they must pair up.")
