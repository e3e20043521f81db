"""What the Plan and an out-of-memory sentence suggest: only settings not already on, each with
the estimate it gives (backend/models/memory_advice.py over the real estimate)."""

import pytest

from backend.config_recipes import tiny_config
from backend.models.hardware import Device
from backend.models.memory import Architecture
from backend.models.memory_advice import changes, fit_hint, oom_advice, run_memory

SMOLLM2_135M = Architecture(576, 1536, 30, 9, 3, 49152, 64, True)
QWEN_7B = Architecture(3584, 18944, 28, 28, 4, 152064, 128, False)


def cpu(memory_gb: float) -> Device:
    return Device("cpu", "CPU", memory_gb, False, False)


def ids(message) -> list[str]:
    return [change.id for change in message.args["changes"]]


def test_each_suggestion_fits_and_gives_the_estimate_it_names():
    config = tiny_config(per_device_train_batch_size=16, cutoff_len=1024, gradient_checkpointing=False)
    needed = run_memory(config, SMOLLM2_135M, cpu(64), "fp32").estimate().total_gb
    run = run_memory(config, SMOLLM2_135M, cpu(needed * 0.8), "fp32")  # does not fit by 20% (+ headroom)
    assert run.estimate().total_gb > run.limit_gb
    hint = fit_hint(run)
    assert hint.id == "memory.fit.any"
    found = dict((change.id, (change, total)) for change, total in changes(run, fit=True))
    for change in hint.args["changes"]:
        assert found[change.id][1] <= run.limit_gb and change.args["total"] == found[change.id][1]
    batch = found["memory.change.batch"][0].args
    settings = {"batch_size": batch["batch"], "gradient_accumulation_steps": batch["accumulation"]}
    assert run.estimate(**settings).total_gb == batch["total"] <= run.limit_gb
    assert batch["batch"] * batch["accumulation"] == 16  # the effective batch is kept
    # The largest batch that fits: the next divisor of 16 above it does not.
    larger = next(b for b in range(batch["batch"] + 1, 17) if 16 % b == 0)
    assert run.estimate(batch_size=larger, gradient_accumulation_steps=16 // larger).total_gb > run.limit_gb
    assert "about" in str(hint) and "GiB" in str(hint)


def test_settings_already_on_are_never_suggested():
    """Checkpointing on and QLoRA 4-bit chosen: only the batch and the cutoff are left to turn."""
    config = tiny_config(method="qlora", quantization_bits=4, gradient_checkpointing=True,
                         per_device_train_batch_size=8, cutoff_len=2048)
    run = run_memory(config, QWEN_7B, cpu(16), "fp32")
    assert run.estimate().total_gb > run.limit_gb
    hint = fit_hint(run)
    named = ids(hint) if "changes" in hint.args else []
    assert "memory.change.checkpointing" not in named and "memory.change.qlora" not in named
    assert "gradient_checkpointing" not in str(hint) and "qlora" not in str(hint).replace("QLoRA 4-bit", "")
    advice = oom_advice(run)
    assert [step.id for step in advice.args["steps"]] == ["memory.change.batch", "memory.change.cutoff"]
    # gradient_checkpointing "auto" resolved on counts as on: the Plan shows it on.
    auto = run_memory(tiny_config(method="qlora", quantization_bits=4, per_device_train_batch_size=8,
                                  cutoff_len=2048), QWEN_7B, cpu(16), "fp32")
    assert auto.settings["gradient_checkpointing"] is True
    assert "memory.change.checkpointing" not in [c.id for c, _ in changes(auto, fit=True)]


def test_when_no_single_change_fits_the_changes_add_up_until_it_does():
    config = tiny_config(method="full", per_device_train_batch_size=8, cutoff_len=1024, gradient_checkpointing=False)
    lowest = run_memory(tiny_config(method="qlora", quantization_bits=4, gradient_checkpointing=True,
                                    per_device_train_batch_size=1, cutoff_len=1024), SMOLLM2_135M, cpu(64), "fp32")
    device = cpu(lowest.estimate().total_gb / 0.9 + 0.05)  # fits only with checkpointing, QLoRA and batch 1
    run = run_memory(config, SMOLLM2_135M, device, "fp32")
    assert not [total for _, total in changes(run, fit=True) if total <= run.limit_gb]
    hint = fit_hint(run)
    assert hint.id == "memory.fit.together"
    assert ids(hint)[:2] == ["memory.change.checkpointing", "memory.change.qlora"]
    assert hint.args["changes"][-1].args["total"] <= run.limit_gb
    totals = [change.args["total"] for change in hint.args["changes"]]
    assert totals == sorted(totals, reverse=True)  # each includes the ones before it


def test_a_model_too_big_for_the_device_says_so():
    run = run_memory(tiny_config(per_device_train_batch_size=2, cutoff_len=512), QWEN_7B, cpu(4), "fp32")
    hint = fit_hint(run)
    assert hint.id == "memory.fit.none" and hint.args["total"] > run.limit_gb
    assert "smaller model" in str(hint)


@pytest.mark.parametrize("knob", ["per_device_train_batch_size 4 with gradient_accumulation_steps 2,",
                                  "cutoff_len 128", "gradient_checkpointing", "qlora"])
def test_out_of_memory_advice_names_every_knob_left_with_its_estimate(knob):
    run = run_memory(tiny_config(per_device_train_batch_size=8, cutoff_len=256, gradient_checkpointing=False),
                     SMOLLM2_135M, cpu(64), "fp32")
    advice = str(oom_advice(run))
    assert knob in advice and advice.count("GiB") == 4
