"""A run hides bitsandbytes from its process when it quantizes nothing (backend/training/unused_libraries.py);
the worker's own runs show it in tests/test_training_worker.py (no bitsandbytes line in a LoRA run's debug.log)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from backend.config import RunConfig
from backend.training.unused_libraries import BITSANDBYTES, skip_bitsandbytes, uses_bitsandbytes


@pytest.mark.parametrize("settings, uses", [({}, False), ({"method": "full"}, False), ({"method": "qlora"}, True),
                                            ({"optim": "adamw_8bit"}, True), ({"optim": "paged_adamw_32bit"}, True),
                                            ({"optim": "adafactor"}, False)])
def test_only_quantizing_runs_use_bitsandbytes(settings, uses):
    assert uses_bitsandbytes(RunConfig(**settings)) is uses


def test_a_lora_run_sees_no_bitsandbytes_and_a_qlora_run_keeps_it(monkeypatch):
    monkeypatch.setitem(sys.modules, BITSANDBYTES, sys.modules.get(BITSANDBYTES))  # as it was, after the test
    monkeypatch.delitem(sys.modules, BITSANDBYTES)
    assert skip_bitsandbytes(RunConfig(method="qlora")) is False and BITSANDBYTES not in sys.modules
    assert skip_bitsandbytes(RunConfig()) is True
    assert importlib.util.find_spec(BITSANDBYTES) is None  # what peft asks
    with pytest.raises(ImportError):
        import bitsandbytes  # noqa: F401
