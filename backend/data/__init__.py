"""Data: load any supported format into canonical rows, check them, fix them.

Canonical row (docs/CONTRACTS.md, rows of a dataset): {"messages": [{"role", "content"}, ...]}.
Entry points: `check_file` (report), `load_rows` / `load_dataset_rows` (rows),
`apply_fixes` + `save_dataset` (workspace datasets), `encode_messages`
(training tokens). Heavy modules are imported lazily by their callers.
"""

from backend.data.errors import DataError

__all__ = ["DataError"]
