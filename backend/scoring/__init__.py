"""One library of per-answer checks, shared by GRPO's rewards (backend/training/rewards.py),
Evaluate's per-row metrics and chosen scorers (backend/evaluation/) and the learning report's
"is this answer right" rule (backend/learning/entries.py).

A scorer is named and configured by plain data, `{"kind": "contains", "text": "Paris"}`, parsed
once (`parse_scorer` / `parse_scorers`, a ScorerError sentence for a bad spec), so the YAML of a run,
the evaluate command line and the UI share one format. A parsed scorer scores an `Item` (the answer,
and the reference where the kind needs one) to a `Score`: a value in [0, 1] and whether it passes.

scorer_specs.py  the spec format: kinds, keys, names, parsing (text, YAML / JSON)
items.py         Item, Score and Scorer: what every scorer takes, gives and is
errors.py        ScorerError and the field readers every kind checks its settings with
text_match.py    exact_match (its normalisation), contains / not_contains, regex, format
structured.py    json (parses, keys, JSON Schema), number within a tolerance
length_bounds.py length in tokens (a counter the caller passes)
cjk_tokens.py    the tokenisation ROUGE and BLEU need for Chinese
overlap.py       ROUGE-1/2/L and BLEU, per row and per set
answer_rule.py   the learning report's rule: a JSON object's keys, key facts, else ROUGE-L
tally.py         per-row results and the share of rows passing each scorer
"""
