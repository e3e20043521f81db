"""The per-GPU estimate under sharding divides as docs/MEMORY.md states."""

import pytest

from backend.models.memory import BYTES, GIB, Architecture, estimate_memory, shard
from backend.models.presets import PRESETS

QWEN_7B = Architecture.from_preset(next(p for k, p in PRESETS.items() if "7B" in k and "Qwen2.5" in k))


def full(**kw):
    return estimate_memory(QWEN_7B, method="full", precision="bf16", batch_size=1, cutoff_len=1024, **kw)


def test_ddp_replicates_everything():
    e = full()
    assert shard(e, QWEN_7B, "ddp", 8).total_gb == e.total_gb


@pytest.mark.parametrize("n", [2, 4, 8])
def test_zero2_splits_gradients_and_optimizer(n):
    e = full()
    s = shard(e, QWEN_7B, "deepspeed_zero2", n)
    assert s.gradients_gb == pytest.approx(e.gradients_gb / n) and s.optimizer_gb == pytest.approx(e.optimizer_gb / n)
    assert (s.weights_gb, s.activations_gb, s.runtime_gb) == (e.weights_gb, e.activations_gb, e.runtime_gb)
    assert s.cpu_offload_gb == 0 and s.sharding == "zero2" and s.world_size == n
    off = shard(e, QWEN_7B, "deepspeed_zero2", n, cpu_offload=True)
    assert off.optimizer_gb == 0 and off.cpu_offload_gb == pytest.approx(e.optimizer_gb / n)
    assert off.total_gb == pytest.approx(s.total_gb - e.optimizer_gb / n)


@pytest.mark.parametrize("distributed", ["deepspeed_zero3", "fsdp"])
def test_zero3_and_fsdp_split_the_weights_too(distributed):
    e = estimate_memory(QWEN_7B, method="lora", precision="bf16", batch_size=2, cutoff_len=512)
    gathered = 2 * QWEN_7B.layer_linear_params() * BYTES["bf16"] / GIB  # the layer in use + the prefetched one
    s = shard(e, QWEN_7B, distributed, 4, precision="bf16")
    assert s.weights_gb == pytest.approx(e.weights_gb / 4 + gathered)
    assert s.adapters_gb == pytest.approx(e.adapters_gb / 4)
    assert s.gradients_gb == pytest.approx(e.gradients_gb / 4) and s.optimizer_gb == pytest.approx(e.optimizer_gb / 4)
    assert s.activations_gb == e.activations_gb


def test_zero3_offload_moves_optimizer_and_weights_to_cpu():
    e = full()
    gathered = 2 * QWEN_7B.layer_linear_params() * 2 / GIB
    s = shard(e, QWEN_7B, "deepspeed_zero3", 8, cpu_offload=True, precision="bf16")
    assert s.weights_gb == pytest.approx(gathered) and s.optimizer_gb == 0 and s.adapters_gb == 0
    assert s.cpu_offload_gb == pytest.approx((e.optimizer_gb + e.weights_gb) / 8)
    # A 7B full fine-tune: about 112 GiB of state on one GPU, a few GiB per GPU of 8 with ZeRO-3 + offload.
    assert e.total_gb > 100 and s.total_gb < e.total_gb / 8 + e.activations_gb


def test_overlap_follows_the_sharded_gradients():
    e = full()
    assert e.overlap_gb < 0 and shard(e, QWEN_7B, "ddp", 8).overlap_gb == e.overlap_gb
    s = shard(e, QWEN_7B, "fsdp", 8, precision="bf16")
    smaller = min(e.activations_gb, e.gradients_gb / 8)
    layers = QWEN_7B.num_hidden_layers
    assert s.overlap_gb == pytest.approx(-smaller * (layers - 1) / layers)
    # DeepSpeed keeps its gradient buffers between steps: nothing subtracted.
    assert shard(e, QWEN_7B, "deepspeed_zero2", 8).overlap_gb == 0
    accumulated = full(gradient_accumulation_steps=4)
    assert shard(accumulated, QWEN_7B, "fsdp", 8, precision="bf16").overlap_gb == 0
