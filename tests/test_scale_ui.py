"""The Train tab's GPU picker, launch line, per-GPU estimate and the command
for each other node, through the tab's handlers with the values a browser sends."""

from __future__ import annotations

import pytest

from backend.config_recipes import tiny_config
from backend.models.hardware import Device, as_dicts
from backend.models.memory import Architecture, config_estimate_kwargs, estimate_memory, shard
from backend.models.presets import PRESETS
from tests.test_ui_train import browser_values
from ui.tabs import train
from ui.views import scale_view

QWEN_7B = "Qwen/Qwen2.5-7B-Instruct"
GPUS = [Device(f"cuda:{i}", "NVIDIA H100", 79.6, True, True) for i in range(8)] + \
    [Device("cpu", "CPU", 2000.0, False, False)]


def test_picker_lists_gpus_and_its_ticks_are_the_devices_setting():
    assert scale_view.gpu_choices(GPUS)[2] == ("2 · NVIDIA H100 · 79.6 GiB", "2")
    assert scale_view.picked_from_setting("auto", GPUS) == [str(i) for i in range(8)]
    assert scale_view.picked_from_setting("1,3", GPUS) == ["1", "3"]
    assert scale_view.picked_from_setting("cpu", GPUS) == []
    assert scale_view.setting_from_picked([str(i) for i in range(8)], GPUS) == "auto"
    assert scale_view.setting_from_picked(["3", "1"], GPUS) == "1,3"
    assert scale_view.setting_from_picked([], GPUS) == "cpu"
    cpu_only = [GPUS[-1]]
    assert scale_view.gpu_choices(cpu_only) == [] and scale_view.setting_from_picked([], cpu_only, "cpu") == "cpu"


def test_processes_follow_the_picked_gpus_nodes_and_ray():
    assert scale_view.world_size(tiny_config(devices="0,1,2"), GPUS) == 3
    assert scale_view.world_size(tiny_config(), GPUS) == 8
    assert scale_view.world_size(tiny_config(nnodes=2, master_addr="10.0.0.1", devices="0,1"), GPUS) == 4
    assert scale_view.world_size(tiny_config(ray_address="auto", ray_num_workers=5), GPUS) == 5
    assert scale_view.world_size(tiny_config(devices="cpu"), GPUS) == 1


def test_estimate_is_per_gpu_with_sharding(ctx):
    config = tiny_config(method="full", distributed="deepspeed_zero3", cpu_offload=True, devices="0,1,2,3",
                       per_device_train_batch_size=1, cutoff_len=1024, gradient_checkpointing=False)
    values = browser_values(config)
    derived, text = train.plan(ctx, "en", QWEN_7B, "demo", {"rows": 1000, "has_eval": False}, as_dicts(GPUS), *values)
    assert "**4** training process(es) on 1 machine(s), deepspeed_zero3, started by torchrun." in derived
    arch = Architecture.from_preset(PRESETS[QWEN_7B])
    expected = shard(estimate_memory(arch, **config_estimate_kwargs(config, "bf16", "cuda")),
                     arch, "deepspeed_zero3", 4, cpu_offload=True, precision="bf16")
    assert f"Fits on NVIDIA H100: about {expected.total_gb:.2f} GiB" in text
    assert "Per GPU: deepspeed_zero3 shards the state over 4 GPUs." in text
    assert f"Offloaded to CPU memory: about {expected.cpu_offload_gb:.2f} GiB per GPU process." in text
    ddp = browser_values(tiny_config(method="full", devices="0,1,2,3", per_device_train_batch_size=1, cutoff_len=1024))
    _, text = train.plan(ctx, "en", QWEN_7B, "demo", {"rows": 1000, "has_eval": False}, as_dicts(GPUS), *ddp)
    assert "Fits" not in text and "Does not fit on NVIDIA H100" in text  # DDP: a full replica per GPU


def test_show_command_gives_the_command_for_each_other_node(ctx):
    values = browser_values(tiny_config(nnodes=3, master_addr="10.0.0.1", master_port=29511, devices="cpu"))
    _, command, _ = train.show_command(ctx, "en", "demo", "demo", *values)
    lines = command.splitlines()
    assert "-m backend.runs.torchrun --nnodes=3 --node-rank=0 --nproc-per-node=1 --master-addr=10.0.0.1 " \
           "--master-port=29511 --rdzv-conf=timeout=300 -m backend.train --config run.yaml" in lines[0]
    assert lines[2] == "# on node 1 (same run folder, shared storage):" and "--node-rank=1" in lines[3]
    assert lines[5] == "# on node 2 (same run folder, shared storage):" and "--node-rank=2" in lines[6]
    assert lines[3] == lines[0].replace("--node-rank=0", "--node-rank=1")


def test_estimate_table_shows_the_backward_overlap_and_adds_up(ctx):
    """Full fine-tuning lists the (negative) overlap of gradients and activations; LoRA does not."""
    def table(config):
        _, text = train.plan(ctx, "en", "Qwen/Qwen2.5-0.5B-Instruct", "demo", {"rows": 1000, "has_eval": False},
                             as_dicts(GPUS), *browser_values(config))
        rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ") and "GiB |" not in line]
        return {name.strip().strip("*"): float(value.strip().strip("*")) for name, value in rows}

    config = tiny_config(method="full", devices="0", per_device_train_batch_size=2, cutoff_len=512,
                       gradient_checkpointing=False)
    rows = table(config)
    arch = Architecture.from_preset(PRESETS["Qwen/Qwen2.5-0.5B-Instruct"])
    expected = estimate_memory(arch, gradient_checkpointing=False, **config_estimate_kwargs(config, "bf16", "cuda"))
    overlap = rows.pop("Gradients reuse freed activations (backward)")
    assert overlap == round(expected.overlap_gb, 2) < 0
    total = rows.pop("Total")
    assert total == round(expected.total_gb, 2)
    assert sum(rows.values()) + overlap == pytest.approx(total, abs=0.01 * (len(rows) + 1))  # rounding per row
    lora = table(tiny_config(method="lora", devices="0", gradient_checkpointing=False))
    assert not any("reuse" in name for name in lora)
