"""Text metrics for generated answers: BLEU, ROUGE-1/2/L and exact match.

Chinese needs care (docs/LIBRARY_TRAPS.md): rouge-score's default tokeniser keeps
only [a-z0-9] runs, so a Chinese answer has no tokens and scores 0.
`MixedTokenizer` keeps every CJK character as its own token (character-level
ROUGE, the usual choice for Chinese summarisation benchmarks such as LCSTS)
and treats Latin text exactly as rouge-score does (lowercase, [a-z0-9] runs,
no stemming), so English scores equal rouge-score's own.

BLEU is sacrebleu's corpus BLEU; the set is tokenised with sacrebleu's "zh"
tokenizer (CJK characters split, the rest as 13a) when any reference holds
CJK text, else with the standard "13a". All scores are on a 0-100 scale.
"""

from __future__ import annotations

from sacrebleu.metrics import BLEU

from backend.data.textrules import MixedTokenizer, has_cjk

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
ROUGE_TOKENIZATION = "CJK characters one token each; Latin text as rouge-score (lowercase [a-z0-9] words, no stemming)"
METRIC_NAMES = ("bleu", "rouge1", "rouge2", "rougeL", "exact_match")


def bleu_tokenizer(references: list[str]) -> str:
    """sacrebleu tokenizer name for a set of references."""
    return "zh" if any(has_cjk(r) for r in references) else "13a"


def normalise(text: str) -> str:
    """For exact match: surrounding and repeated whitespace do not count."""
    return " ".join(text.split())


def row_scores(predictions: list[str], references: list[str]) -> list[dict]:
    """Per-row ROUGE F-measures and exact match (0-100), in the order given."""
    # Here, not at the top: rouge-score imports nltk and scipy (1.6 s of CPU), which every refusal of
    # the evaluate command line and the app's start would pay.
    from rouge_score import rouge_scorer

    _check_lengths(predictions, references)
    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), tokenizer=MixedTokenizer())
    rows = []
    for prediction, reference in zip(predictions, references):
        scores = scorer.score(reference, prediction)  # (target, prediction)
        row = {name: 100.0 * scores[name].fmeasure for name in ROUGE_TYPES}
        row["exact_match"] = 100.0 if normalise(prediction) == normalise(reference) else 0.0
        rows.append(row)
    return rows


def corpus_scores(predictions: list[str], references: list[str]) -> dict:
    """Set-level scores: corpus BLEU, mean ROUGE F-measures, exact-match rate."""
    _check_lengths(predictions, references)
    if not references:
        return {}
    tokenize = bleu_tokenizer(references)
    bleu = BLEU(tokenize=tokenize).corpus_score(predictions, [references]).score
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
