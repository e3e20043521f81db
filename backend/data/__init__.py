"""Data: load any supported format into canonical rows, check them, fix them.

Canonical row (docs/CONTRACTS.md, rows of a dataset): {"messages": [{"role", "content"}, ...]}.
Entry points: `check_file` (report), `load_file_rows` (a file's rows), `load_rows` (a run's, split), `load_dataset_rows`,
`apply_fixes` + `save_dataset` (workspace datasets), `encode_messages`
(training tokens). Heavy modules are imported lazily by their callers.

read.py, text_encoding.py, encoding_evidence.py  bytes on disk -> raw records, in the right text encoding
load.py           open a file or a LLaMA-Factory folder, detect its shape, canonical rows with their problems
turns.py          what both kinds of shape read: a text field, the system prompt, history, one turn
shapes.py         alpaca, sharegpt, OpenAI messages, a column mapping -> canonical rows
pairwise.py       pairwise and KTO preference shapes -> canonical rows
unsupported.py    data the app reads but cannot train on, told apart from a broken row
checks/           what is wrong with a dataset (specs, run, stats, report)
textrules.py      text patterns the checks (which find) and the fixes (which repair) share
fix_table.py      the one table of fixes a user can ask for
fix_steps.py      what one fix did (FixStep), below the fix modules
fixes.py, pair_fixes.py  the fixes on instruction rows and on preference rows
prepare.py        a data session: one file read once, then fixed, checked, paged and saved from memory
saved_datasets.py  workspace datasets: the cleaned rows saved with their meta.json
resolve.py        a run's `dataset` setting -> rows (starter and demo names, workspace datasets, files)
prompt_files.py   a file of prompts alone (grpo)
pair_rows.py      preference rows as a stage trains on them, and what cutoff_len does to each
encode.py         canonical rows -> training tokens through the chat template
template_preview.py  one row as the trainer sees it
identity_rows.py, general_prompts.py, demo_rows.py, demo_pairs.py  the starter's and the demo's own data
cli.py            python -m backend.data check | fix
errors.py         DataError: a file the data layer cannot read at all
"""

from backend.data.errors import DataError

__all__ = ["DataError"]
