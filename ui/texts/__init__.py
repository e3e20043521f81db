"""The UI's strings, English and Chinese, as plain tables that import nothing of the UI.

The rule: a table of texts keyed `<tab>.<what>` -> {"en": ..., "zh": ...} that a module passes to
the shell as its TEXT lives here as `<owner>_texts.py` once it has outgrown its owner (the Data
tab's: data_texts.py, which tabs/data.py imports as its TEXT); the Chinese of what other parts
already say in English sits here beside them, keyed as they are: message_texts.py (ZH: every
message id of backend/messages.py) and config_help.py (HELP_ZH: every RunConfig field's help).
tests/test_i18n.py fails on a key without both languages or a placeholder that differs.
"""
