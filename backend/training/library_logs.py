"""The libraries' own warnings go to RUN/debug.log, not to train.log.

train.log is what the user reads: the Runs tab shows it, and a failed run's last line comes from it.
There, library lines read as failures: bitsandbytes' "Failed to load CPU gemm_4bit_forward from
kernels-community: No module named 'kernels'", transformers' FutureWarnings, and its "Token indices
sequence length is longer than the specified maximum" (rows are cut to the cutoff afterwards). The
debug log keeps them for a bug report (the diagnostics zip holds its last lines). The project's own
lines (the `backend` logger) and a crash's traceback stay in train.log.
"""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path

from backend.runs.files import DEBUG_LOG_FILE

_MARK = "_library_log"  # the handler this module set, replaced when a process sets up again


def hold_library_logs() -> None:
    """From the worker's first line: what libraries log before the run folder is known (checking the
    model's config imports transformers, which imports bitsandbytes) is held, for route_python_logs."""
    held = logging.handlers.MemoryHandler(capacity=10_000, flushLevel=logging.CRITICAL + 1)
    setattr(held, _MARK, True)
    _set_root(held)


def route_python_logs(run_dir: Path) -> None:
    """Loggers without handlers of their own (bitsandbytes', accelerate's, peft's...) and Python's
    warnings, into debug.log, with what was held until now. No library is imported here."""
    handler = logging.FileHandler(Path(run_dir) / DEBUG_LOG_FILE, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S"))
    setattr(handler, _MARK, True)
    for held in [h for h in logging.getLogger().handlers if isinstance(h, logging.handlers.MemoryHandler)]:
        held.setTarget(handler)
        held.flush()
    _set_root(handler)


def _set_root(handler: logging.Handler) -> None:
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _MARK, False)]:
        root.removeHandler(old)
        old.close()  # a held handler has flushed into its target already
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)  # warnings.warn -> the "py.warnings" logger -> the root's handler


def route_transformers_logs() -> None:
    """transformers logs through a stderr handler of its own and does not propagate; once it is imported
    (it pulls torch in), its lines go where the others go."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_default_handler()
    library = hf_logging.get_logger()  # the library's root logger, "transformers"
    ours = [h for h in logging.getLogger().handlers if getattr(h, _MARK, False)]
    library.handlers = [h for h in library.handlers if not getattr(h, _MARK, False)] + ours
    library.setLevel(logging.WARNING)
