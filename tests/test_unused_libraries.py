"""A run hides bitsandbytes from its process when it quantizes nothing (backend/training/unused_libraries.py),
and so does `python -m backend.evaluate --run R` for a run that quantized nothing; the worker's own runs show it
in tests/test_training_worker.py (no bitsandbytes line in a LoRA run's debug.log)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from backend.config import RunConfig
from backend.training.unused_libraries import (
    BITSANDBYTES,
    skip_bitsandbytes,
    skip_bitsandbytes_for_run,
    uses_bitsandbytes,
)


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


def test_a_runs_evaluation_hides_it_by_the_runs_config(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, BITSANDBYTES, sys.modules.get(BITSANDBYTES))
    monkeypatch.delitem(sys.modules, BITSANDBYTES)
    qlora, lora, broken = (tmp_path / name for name in ("qlora", "lora", "broken"))
    for folder in (qlora, lora, broken):
        folder.mkdir()
    RunConfig(method="qlora").save(qlora / "config.yaml")
    RunConfig().save(lora / "config.yaml")
    (broken / "config.yaml").write_text("method: [", encoding="utf-8")
    for folder in (qlora, broken, tmp_path / "missing"):  # kept: it quantizes, or the command refuses it later
        assert skip_bitsandbytes_for_run(folder) is False and BITSANDBYTES not in sys.modules
    assert skip_bitsandbytes_for_run(lora) is True and importlib.util.find_spec(BITSANDBYTES) is None


def test_the_evaluate_entry_point_hides_it_only_in_its_own_process(monkeypatch, tmp_path, capsys):
    """In a process that goes on (a test calling main), the imports stay as they were. The run's base model
    folder is gone: a sentence that names it and exit 2, not a traceback."""
    from backend.evaluate import main

    monkeypatch.setitem(sys.modules, BITSANDBYTES, sys.modules.get(BITSANDBYTES))
    monkeypatch.delitem(sys.modules, BITSANDBYTES)
    RunConfig(model_name_or_path=str(tmp_path / "no-model")).save(tmp_path / "config.yaml")
    assert main(["--run", str(tmp_path), "--checkpoint", "base"]) == 2
    err = capsys.readouterr().err
    assert f"evaluation failed: Model folder {tmp_path / 'no-model'} does not exist" in err and "Traceback" not in err
    assert BITSANDBYTES not in sys.modules
