"""Heavy imports for the UI process, once, under a lock.

transformers 5.23's lazy module is not safe to import for the first time from
two threads at once (one of them gets "cannot import name 'AutoTokenizer'"),
and gradio runs handlers on a thread pool. So the UI process imports the
heavy libraries in one place: in a background thread started when a browser
loads the page (start-up stays fast), and again at the top of every handler that
reaches torch / transformers / peft, which waits for the first import or
returns at once when it is done. The lock is backend/models/import_lock.py's, which
the local-models scan takes too (the scan's import of transformers met the warm-up's and
left a half-built transformers behind: every later import in the app failed).
"""

from __future__ import annotations

import threading

from backend.models.import_lock import FIRST_IMPORT_LOCK as _LOCK

_READY = threading.Event()


def import_heavy_libraries() -> None:
    if _READY.is_set():
        return
    with _LOCK:
        if _READY.is_set():
            return
        import peft  # noqa: F401
        import torch  # noqa: F401
        from transformers import (  # noqa: F401  (resolves the lazy names once)
            AutoConfig,
            AutoModelForCausalLM,
            AutoTokenizer,
            BitsAndBytesConfig,
            GenerationConfig,
            PreTrainedTokenizerFast,
            Qwen2Config,
            Qwen2ForCausalLM,
            StoppingCriteria,
            StoppingCriteriaList,
            TextIteratorStreamer,
        )

        _READY.set()


def start_in_background() -> None:
    if _READY.is_set() or _LOCK.locked():
        return
    threading.Thread(target=import_heavy_libraries, name="heavy-imports", daemon=True).start()
