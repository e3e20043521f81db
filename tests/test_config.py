from pathlib import Path

import pytest
import torch

from backend.config import RunConfig, derived_numbers, split_sizes
from backend.config_policy import ConfigError
from backend.models.hardware import Device, resolve_precision

CPU = Device("cpu", "CPU", 24.0, False, False)
H100 = Device("cuda:0", "H100", 80.0, True, True)
T4 = Device("cuda:0", "T4", 16.0, False, True)


def test_yaml_round_trip():
    config = RunConfig(method="qlora", lora_target=["q_proj", "v_proj"], eval_steps=10, callbacks=["m:C"])
    assert RunConfig.from_yaml(config.to_yaml()) == config


def test_overrides_parse_values():
    config = RunConfig().with_overrides(["learning_rate=1e-4", "lora_target=q_proj,v_proj", "use_dora=true", "max_steps=20"])
    assert config.learning_rate == 1e-4
    assert config.lora_target == ["q_proj", "v_proj"]
    assert config.use_dora is True and config.max_steps == 20


def test_qlora_defaults_to_4_bits():
    assert RunConfig(method="qlora").quantization_bits == 4


@pytest.mark.parametrize("settings, words", [
    ({"lr": 1}, "Unknown setting 'lr'"),
    ({"lora_alpa": 8}, "did you mean 'lora_alpha'"),
    ({"lora_alpha": 0}, "lora_alpha must be above 0"),
    ({"method": "lora", "quantization_bits": 4}, "only applies to method 'qlora'"),
    ({"val_size": 0, "early_stopping_patience": 2}, "needs an eval split"),
    ({"val_size": 0, "eval_steps": 5}, "needs an eval split"),
    ({"precision": "fp8"}, "is not one of"),
    ({"max_steps": "ten"}, "should be int"),
    ({"callbacks": ["nocolon"]}, "should look like"),
    ({"max_steps": -1, "num_train_epochs": 0}, "num_train_epochs above 0"),
])
def test_impossible_settings_fail_with_a_sentence(settings, words):
    with pytest.raises(ConfigError, match=words):
        RunConfig.from_dict(settings)


def test_cutoff_longer_than_context():
    with pytest.raises(ConfigError, match="longer than the model's context"):
        RunConfig(cutoff_len=4096).check_model_context(2048)


def test_precision_against_devices():
    assert RunConfig().check_devices([CPU]) == "fp32"
    assert RunConfig().check_devices([H100]) == "bf16"
    assert RunConfig().check_devices([T4]) == "fp16"
    with pytest.raises(ConfigError, match="bf16 is not supported on T4"):
        RunConfig(precision="bf16").check_devices([T4])
    with pytest.raises(ConfigError, match="needs a GPU"):
        RunConfig(precision="fp16").check_devices([CPU])
    assert resolve_precision("auto", [H100, T4]) == "fp16"
    with pytest.raises(ConfigError, match="DoRA on an 8-bit base fails on the CPU"):
        RunConfig(method="qlora", quantization_bits=8, use_dora=True).check_devices([CPU])
    assert RunConfig(method="qlora", quantization_bits=8, use_dora=True).check_devices([H100]) == "bf16"


def test_bf16_on_the_cpu_is_a_choice_where_the_cpu_has_it():
    bf16_cpu = Device("cpu", "CPU", 24.0, True, False)
    assert RunConfig().check_devices([bf16_cpu]) == "fp32"  # auto keeps CPU runs exact
    assert RunConfig(precision="bf16").check_devices([bf16_cpu]) == "bf16"
    with pytest.raises(ConfigError, match="bf16 is not supported on CPU .*AVX512-BF16 or AMX"):
        RunConfig(precision="bf16").check_devices([CPU])


def test_the_cpu_reports_bf16_from_its_own_flags():
    from backend.models.hardware import detect_devices

    flags = next((line.split(":", 1)[1].split() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), [])
    assert detect_devices()[-1].supports_bf16 == bool({"avx512_bf16", "amx_bf16"} & set(flags))


def test_derived_numbers():
    config = RunConfig(per_device_train_batch_size=4, gradient_accumulation_steps=2, num_train_epochs=2, warmup_ratio=0.1)
    numbers = derived_numbers(config, num_train_rows=100, world_size=2)
    # 100 rows / (4 per device x 2 devices) = 13 batches per device; 13 / 2 accumulation rounds up to 7 steps
    # 14 steps are too few for a warmup (WARMUP_MIN_STEPS): its first step would run at learning rate 0
    assert numbers == {"effective_batch": 16, "steps_per_epoch": 7, "total_steps": 14, "warmup_steps": 0, "epochs": 2.0}
    assert derived_numbers(config, num_train_rows=200, world_size=2)["warmup_steps"] == 3  # ceil(0.1 x 26 steps)
    assert derived_numbers(RunConfig(max_steps=30), 10)["total_steps"] == 30
    assert split_sizes(100, 0.1) == (90, 10) and split_sizes(5, 0.01) == (4, 1) and split_sizes(5, 0) == (5, 0)


class _TinyLM(torch.nn.Module):
    """The smallest model the Trainer accepts: the test is about its step count, not the model."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x=None, labels=None):
        return {"loss": ((x.float().mean() - self.weight) ** 2).sum()}


@pytest.mark.parametrize("rows, batch, accumulation, epochs", [(40, 4, 3, 1), (40, 4, 3, 2.5), (7, 2, 4, 1),
                                                               (12, 4, 3, 1)])
def test_derived_numbers_match_a_real_trainer(tmp_path, rows, batch, accumulation, epochs):
    from transformers import Trainer, TrainingArguments

    config = RunConfig(per_device_train_batch_size=batch, gradient_accumulation_steps=accumulation,
                       num_train_epochs=epochs, val_size=0)
    data = [{"x": torch.tensor([float(i)])} for i in range(rows)]
    args = TrainingArguments(str(tmp_path), per_device_train_batch_size=batch, gradient_accumulation_steps=accumulation,
                             num_train_epochs=epochs, use_cpu=True, report_to=[], save_strategy="no",
                             logging_strategy="no", disable_tqdm=True)
    trainer = Trainer(model=_TinyLM(), args=args, train_dataset=data)
    trainer.train()
    assert derived_numbers(config, rows)["total_steps"] == trainer.state.max_steps == trainer.state.global_step
    if (rows, batch, accumulation, epochs) == (40, 4, 3, 1):
        assert trainer.state.max_steps == 4  # 10 batches, 3 per step: the last partial step counts


@pytest.mark.parametrize("setting", ["learning_rate=.nan", "learning_rate=.inf", "num_train_epochs=.nan",
                                     "max_steps=.inf", "max_steps=.nan", "lora_dropout=-.inf",
                                     "neftune_noise_alpha=.nan", "warmup_ratio=.nan", "max_grad_norm=.inf"])
def test_non_finite_numbers_are_refused(setting):
    with pytest.raises(ConfigError, match="is not a finite number"):
        RunConfig().with_overrides([setting])


def test_non_finite_numbers_are_refused_when_built_directly():
    with pytest.raises(ConfigError, match="learning_rate = nan is not a finite number"):
        RunConfig(learning_rate=float("nan"))


def test_binary_or_unreadable_config_file_is_a_sentence(tmp_path):
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ConfigError, match="is not a text"):
        RunConfig.load(binary)
    nul = tmp_path / "nul.yaml"
    nul.write_bytes(b"learning_rate: 1\x00\x00")
    with pytest.raises(ConfigError, match="is a binary file"):
        RunConfig.load(nul)
    with pytest.raises(ConfigError, match="cannot be read"):
        RunConfig.load(tmp_path)
