"""The UI's strings, English and Chinese, as plain tables that import nothing but each other.

The rule: the texts of module `ui/<group>/<owner>.py` (or `ui/<owner>.py`) are the table
`ui/texts/<owner>_texts.py`, keyed `<tab>.<what>` -> {"en": ..., "zh": ...}; the owner imports it as
its TEXT (a panel placed in several tabs: one table per tab, RUNS_TEXT, EVALUATE_TEXT, ...), the
shell merges the tabs' tables, and a tab's table spreads those of the panels it places. The data
tab's is data_texts.py. The Chinese of what other parts already say in English sits here too,
keyed as they are: message_texts.py (ZH: every message id of backend/messages.py) and
config_help.py (HELP_ZH: every RunConfig field's help). tests/test_i18n.py fails on a key without
both languages or with placeholders that differ.

The Train form's texts follow the same rule: forms_texts.py (labels by field name, placeholders,
the radios' choices) and grpo_form_texts.py (the rewards'), which ui/forms.py and ui/grpo_form.py
check against the form's fields and key as the browser looks them up.

Words outside: the English defaults a view falls back on when its caller passes no words
(ui/views/charts.py WORDS) and the Evaluate table's metric columns (ui/tabs/evaluate.py
METRIC_LABELS), which name data columns rather than speak to the user in a language.
"""

from __future__ import annotations


def both(en: str, zh: str) -> dict[str, str]:
    """One text in both languages, as every table here keys it."""
    return {"en": en, "zh": zh}
