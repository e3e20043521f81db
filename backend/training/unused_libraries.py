"""A run imports no library it will not use.

peft imports bitsandbytes whenever it is installed (peft.import_utils.is_bnb_available asks
importlib's find_spec), and bitsandbytes imports torch's inductor on its way in: 1.0-1.5 CPU-seconds
of every run's start (docs/BENCHMARKS.md), and a "Failed to load CPU gemm_4bit_forward" line, for a
run that quantizes nothing. A None under the name in sys.modules makes find_spec answer None and an
import raise ImportError, so peft and TRL see no bitsandbytes; transformers only imports it to
quantize or for its 8-bit and paged optimizers, which keep it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from backend.config import ConfigError, RunConfig
from backend.runs.files import CONFIG_FILE

BITSANDBYTES = "bitsandbytes"
BITSANDBYTES_OPTIMIZERS = ("8bit", "paged")  # adamw_8bit, paged_adamw_8bit, paged_adamw_32bit


def uses_bitsandbytes(config) -> bool:
    return config.method == "qlora" or any(word in config.optim for word in BITSANDBYTES_OPTIMIZERS)


def skip_bitsandbytes(config) -> bool:
    """Hide bitsandbytes from this process when the run `config` describes does not use it; True if hidden.
    Called before the first import of peft or transformers (an import already made is left alone)."""
    if uses_bitsandbytes(config) or BITSANDBYTES in sys.modules:
        return False
    sys.modules[BITSANDBYTES] = None
    return True


def skip_bitsandbytes_for_run(run_dir) -> bool:
    """The same for a process that loads a run's checkpoints (`python -m backend.evaluate --run R`), by the
    run's config.yaml; a folder without a readable one is left alone (the command refuses it later, saying why)."""
    try:
        config = RunConfig.load(Path(run_dir) / CONFIG_FILE)
    except (ConfigError, OSError):
        return False
    return skip_bitsandbytes(config)
