"""The tokenisation ROUGE and BLEU need for Chinese (docs/LIBRARY_TRAPS.md).

rouge-score's default tokeniser keeps only [a-z0-9] runs, so a Chinese answer has no tokens and
scores 0. `MixedTokenizer` keeps every CJK character as its own token (character-level ROUGE, the
usual choice for Chinese summarisation benchmarks such as LCSTS) and treats Latin text exactly as
rouge-score does (lowercase, [a-z0-9] runs, no stemming), so English scores equal rouge-score's own.

BLEU is sacrebleu's; a set is tokenised with sacrebleu's "zh" tokenizer (CJK characters split, the
rest as 13a) when any reference holds CJK text, else with the standard "13a".
"""

from __future__ import annotations

import re

# CJK ideographs (+ extension A, compatibility), kana and hangul: one token per character.
CJK_CHAR = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_CJK_RE = re.compile(f"[{CJK_CHAR}]")
_TOKEN_RE = re.compile(f"[{CJK_CHAR}]|[a-z0-9]+")
ROUGE_TOKENIZATION = "CJK characters one token each; Latin text as rouge-score (lowercase [a-z0-9] words, no stemming)"


class MixedTokenizer:
    """rouge-score tokenizer that keeps CJK characters (rouge-score calls `.tokenize`)."""

    def tokenize(self, text: str) -> list[str]:
        return _TOKEN_RE.findall(text.lower())


def has_cjk(text: str) -> bool:
    return bool(_CJK_RE.search(text))


def bleu_tokenizer(references: list[str]) -> str:
    """sacrebleu tokenizer name for a set of references."""
    return "zh" if any(has_cjk(r) for r in references) else "13a"
