"""One lock for a process's first import of transformers and its kin from a thread.

transformers 5.23's lazy module is not safe to import for the first time from two threads at once:
one of them gets "cannot import name 'is_tokenizers_available' from partially initialized module
'transformers.utils'", and the half-built module stays in sys.modules, so every later import in that
process fails too. The app imports from several threads: its warm-up (ui/warmup.py), gradio's
handler threads, and the local-models scan (backend/models/local/fit.py, transformers' GGUF table).
Each takes this lock around an import that may be the first. The lock is process-wide state by
nature: so is Python's module cache it guards."""

from __future__ import annotations

import threading

FIRST_IMPORT_LOCK = threading.Lock()
