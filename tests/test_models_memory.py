"""The memory estimate against numbers computed by hand (docs/MEMORY.md has the formula)."""

import json

import pytest

from backend.config import RunConfig
from backend.config_recipes import tiny_config
from backend.models.memory import (
    ACTIVATION_FACTOR,
    CHECKPOINT_HEAP_SHARE,
    GIB,
    NF4_BYTES,
    RUNTIME_GB,
    Architecture,
    architecture_for,
    config_estimate_kwargs,
    estimate_memory,
    lora_params,
    step_row_tokens,
)
from backend.models.presets import PRESETS
from tests.conftest import REPO

# h=8, i=16, 2 layers, 2 heads of 4, 1 kv head, vocab 10, tied embeddings.
TINY = Architecture(hidden_size=8, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2,
                    num_key_value_heads=1, vocab_size=10, head_dim=4, tie_word_embeddings=True)
# Per layer: q 8x8=64, k 8x4=32, v 32, o 64, gate/up/down 8x16=128 each -> 576.
LINEAR = 2 * 576
PARAMS = LINEAR + 10 * 8 + 8 * 5   # + tied embedding + 5 norms of 8
# Per token per layer: 4h + 3q + 3kv + 4i = 32 + 24 + 12 + 64.
ACT = 132


def b(gb):
    return round(gb * GIB)


def test_parameter_counts_by_hand():
    assert TINY.num_parameters() == PARAMS == 1272
    # r * (in + out) per adapted layer: (16+12+12+16+24+24+24) * 2 per layer, 2 layers.
    assert lora_params(TINY, 2, "all-linear") == 512
    assert lora_params(TINY, 2, ["q_proj", "v_proj"]) == 2 * 2 * (16 + 12)


def test_lora_fp32_terms():
    e = estimate_memory(TINY, method="lora", precision="fp32", batch_size=3, cutoff_len=5,
                        lora_r=2, device_kind="cuda")
    tokens = 15
    assert b(e.weights_gb) == PARAMS * 4
    assert b(e.adapters_gb) == b(e.gradients_gb) == 512 * 4
    assert b(e.optimizer_gb) == 512 * 8
    assert b(e.activations_gb) == 2 * ACT * 4 * tokens + tokens * 10 * (4 + 4)  # fp32 logits: no upcast copy
    assert e.runtime_gb == RUNTIME_GB["cuda"]
    assert e.trainable_params == 512
    cpu = estimate_memory(TINY, method="lora", precision="fp32", batch_size=3, cutoff_len=5, lora_r=2,
                          device_kind="cpu")
    assert cpu.activations_gb == pytest.approx(e.activations_gb * ACTIVATION_FACTOR["cpu"])
    assert cpu.runtime_gb == RUNTIME_GB["cpu"] and cpu.weights_gb == e.weights_gb


def test_checkpointing_keeps_layer_inputs_and_one_layer():
    e = estimate_memory(TINY, method="lora", precision="fp32", batch_size=3, cutoff_len=5, lora_r=2,
                        gradient_checkpointing=True)
    assert b(e.activations_gb) == 2 * 8 * 4 * 15 + ACT * 4 * 15 + 15 * 10 * 8


def test_cpu_checkpointing_adds_what_the_heap_keeps_of_the_recomputed_layers():
    """On the CPU: the live tensors times the CPU factor, plus a share of one layer's full activations
    for each layer after the first (recomputed in backward; measured, docs/MEMORY.md)."""
    kwargs = dict(method="lora", precision="fp32", batch_size=3, cutoff_len=5, lora_r=2)
    for checkpointing in (False, True):
        gpu = estimate_memory(TINY, gradient_checkpointing=checkpointing, device_kind="cuda", **kwargs)
        cpu = estimate_memory(TINY, gradient_checkpointing=checkpointing, device_kind="cpu", **kwargs)
        heap = CHECKPOINT_HEAP_SHARE["cpu"] * (2 - 1) * ACT * 4 * 15 if checkpointing else 0
        assert cpu.activations_gb * GIB == pytest.approx(gpu.activations_gb * GIB * ACTIVATION_FACTOR["cpu"] + heap)
    assert CHECKPOINT_HEAP_SHARE["cuda"] == 0


MEASURED = json.loads((REPO / "docs" / "memory_runs_checkpointing.json").read_text())


@pytest.mark.parametrize("run", MEASURED, ids=lambda r: "{model}-{per_device_train_batch_size}x{cutoff_len}-ckpt-"
                         "{gradient_checkpointing}".format(model=r["model"], **r["settings"]))
def test_the_estimate_follows_the_measured_peaks_with_and_without_checkpointing(run):
    """bench/checkpointing_memory.py: the real worker on the 2-layer demo and on SmolLM2-135M."""
    assert run["state"] == "completed"
    estimate = measured_estimate(run, run["settings"]["gradient_checkpointing"])
    assert estimate == pytest.approx(run["peak_rss_gb"], rel=0.15)


def measured_estimate(run: dict, checkpointing: bool) -> float:
    """The estimate of a measured run's settings (the worker's defaults otherwise), in GiB."""
    config = tiny_config(**{**run["settings"], "gradient_checkpointing": checkpointing})
    return estimate_memory(Architecture(**run["architecture"]), gradient_checkpointing=checkpointing,
                           **config_estimate_kwargs(config, run["precision"], "cpu")).total_gb


def test_checkpointing_lowers_the_estimate_where_it_lowered_the_measured_peak():
    """On the 2-layer demo checkpointing saves little, but it saves: the Plan must not say it costs memory."""
    pairs = {}
    for run in MEASURED:
        s = run["settings"]
        pairs.setdefault((run["model"], s["per_device_train_batch_size"], s["cutoff_len"]), {})[
            s["gradient_checkpointing"]] = run
    assert len(pairs) == 4 and all(len(pair) == 2 for pair in pairs.values())
    for pair in pairs.values():
        assert pair[True]["peak_rss_gb"] < pair[False]["peak_rss_gb"]
        assert measured_estimate(pair[True], True) < measured_estimate(pair[False], False)


def test_qlora_on_the_cpu_keeps_the_read_linear_weights():
    gpu = estimate_memory(TINY, method="qlora", quantization_bits=4, precision="fp32", batch_size=1, cutoff_len=1)
    cpu = estimate_memory(TINY, method="qlora", quantization_bits=4, precision="fp32", batch_size=1, cutoff_len=1,
                          device_kind="cpu")
    assert (cpu.weights_gb - gpu.weights_gb) * GIB == pytest.approx(LINEAR * 4)


def test_lora_dropout_keeps_a_copy_of_each_adapted_input():
    e = estimate_memory(TINY, method="lora", precision="bf16", batch_size=1, cutoff_len=1, lora_r=2,
                        lora_target=["q_proj", "down_proj"], lora_dropout=0.1)
    # inputs: q_proj 8 + down_proj 16 elements per token per layer, bf16.
    assert b(e.activations_gb) == 2 * (ACT + 24) * 2 + 10 * (2 + 4 + 4)
    assert b(e.weights_gb) == PARAMS * 2


def test_qlora_quantises_linear_layers_only():
    four = estimate_memory(TINY, method="qlora", quantization_bits=4, precision="bf16", batch_size=1, cutoff_len=1)
    assert four.weights_gb * GIB == pytest.approx(LINEAR * NF4_BYTES + (80 + 40) * 4)
    eight = estimate_memory(TINY, method="qlora", quantization_bits=8, precision="bf16", batch_size=1, cutoff_len=1)
    row_scales = 4 * 2 * (8 + 4 + 4 + 8 + 16 + 16 + 8)
    assert b(eight.weights_gb) == LINEAR + row_scales + 120 * 4


def test_full_fine_tuning_pays_for_every_weight():
    e = estimate_memory(TINY, method="full", precision="bf16", batch_size=1, cutoff_len=1, optim="adamw_8bit")
    assert b(e.weights_gb) == b(e.gradients_gb) == PARAMS * 4
    assert b(e.optimizer_gb) == PARAMS * 2
    assert e.adapters_gb == 0 and e.trainable_params == PARAMS


def test_verdict_keeps_headroom():
    arch = Architecture.from_preset(PRESETS["Qwen/Qwen2.5-7B-Instruct"])
    full = estimate_memory(arch, method="full", precision="bf16", batch_size=1, cutoff_len=512)
    qlora = estimate_memory(arch, method="qlora", precision="bf16", batch_size=1, cutoff_len=512,
                            gradient_checkpointing=True)
    # 7.6 B weights: fp32 master weights + grads + Adam = 16 bytes each, ~113 GiB before activations.
    assert full.weights_gb + full.gradients_gb + full.optimizer_gb == pytest.approx(7_615_487_488 * 16 / GIB)
    assert not full.fits(80) and qlora.fits(16) and not qlora.fits(qlora.total_gb)


def test_presets_match_published_parameter_counts():
    for preset in PRESETS.values():
        assert Architecture.from_preset(preset).num_parameters() == pytest.approx(preset.num_parameters, rel=0.01)


def test_config_json_matches_a_real_model(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=300, tie_word_embeddings=False)
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    model = LlamaForCausalLM(config)
    arch = architecture_for(str(tmp_path), tmp_path / "models")
    assert arch.num_parameters() == sum(p.numel() for p in model.parameters())


def test_unusable_folders_say_why(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        architecture_for(str(tmp_path), tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "x"}))
    with pytest.raises(ValueError, match="lacks the architecture number"):
        architecture_for(str(tmp_path), tmp_path)
    with pytest.raises(ValueError, match="not built yet"):
        architecture_for("demo", tmp_path / "models")


def parts_sum(e):
    """Every part the Train tab lists (cpu_offload_gb is CPU memory, outside the total)."""
    return sum(v for k, v in e.as_dict().items() if k.endswith("_gb") and k not in ("total_gb", "cpu_offload_gb"))


def test_full_fine_tuning_counts_gradients_and_activations_overlapping_in_backward():
    """Backward frees a layer's activations as its gradients appear: A + G less all but one
    layer's share of the smaller one (TINY has 2 layers, so half of it)."""
    kwargs = dict(method="full", precision="fp32", device_kind="cuda")
    # Activations larger: A = 2 layers * 132 * 4 bytes * 15 tokens + logits 15 * 10 * 8 = 17,040; G = 5,088.
    e = estimate_memory(TINY, batch_size=3, cutoff_len=5, **kwargs)
    assert b(e.activations_gb) == 17_040 and b(e.gradients_gb) == PARAMS * 4 == 5_088
    assert b(e.overlap_gb) == -5_088 // 2
    weights, optimizer = PARAMS * 4, PARAMS * 8
    assert b(e.total_gb - e.runtime_gb) == weights + optimizer + 17_040 + 5_088 // 2  # = W + O + max(A, G) + G/2
    # Gradients larger: one token, A = 2 * 132 * 4 + 10 * 8 = 1,136: half of A overlaps.
    small = estimate_memory(TINY, batch_size=1, cutoff_len=1, **kwargs)
    assert b(small.activations_gb) == 1_136 and b(small.overlap_gb) == -568
    for estimate in (e, small):
        assert estimate.total_gb == pytest.approx(parts_sum(estimate))
    # With accumulation the previous micro-batch's gradients are there all through the next forward.
    accumulated = estimate_memory(TINY, batch_size=3, cutoff_len=5, gradient_accumulation_steps=2, **kwargs)
    assert accumulated.overlap_gb == 0 and accumulated.total_gb == pytest.approx(e.total_gb - e.overlap_gb)


def test_lora_keeps_its_gradients_counted_whole():
    for method in ("lora", "qlora"):
        e = estimate_memory(TINY, method=method, precision="fp32", batch_size=3, cutoff_len=5, lora_r=2,
                            device_kind="cpu")
        assert e.overlap_gb == 0
        assert e.total_gb == pytest.approx(e.weights_gb + e.adapters_gb + e.gradients_gb + e.optimizer_gb
                                           + e.activations_gb + e.runtime_gb) == pytest.approx(parts_sum(e))


def test_overlap_at_the_smollm2_135m_size():
    """The case of docs/MEMORY.md: 30 layers, gradients (0.50 GiB) smaller than the activations."""
    arch = Architecture(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                        num_key_value_heads=3, vocab_size=49152, head_dim=64, tie_word_embeddings=True)
    for checkpointing in (False, True):
        e = estimate_memory(arch, method="full", precision="fp32", batch_size=2, cutoff_len=512, device_kind="cpu",
                            chunked_loss=True, gradient_checkpointing=checkpointing)
        assert e.activations_gb > e.gradients_gb == pytest.approx(134_515_008 * 4 / GIB)
        assert e.overlap_gb == pytest.approx(-e.gradients_gb * 29 / 30)
        assert e.total_gb == pytest.approx(parts_sum(e))


def test_a_step_is_sized_by_the_tokens_its_rows_take():
    """Packed batches hold the rows' own tokens (their mean a row), padded ones their longest row's;
    each row is cut at cutoff_len, and without lengths the estimate keeps batch x cutoff_len."""
    assert step_row_tokens([40, 60, 300], 256, packed=True) == pytest.approx((40 + 60 + 256) / 3)
    assert step_row_tokens([40, 60, 300], 256, packed=False) == 256
    assert step_row_tokens([40, 60], 256, packed=False) == 60 and step_row_tokens([], 256, packed=True) is None
    settings = dict(method="lora", precision="fp32", batch_size=8, lora_r=2, device_kind="cpu")
    short = estimate_memory(TINY, cutoff_len=256, row_tokens=40.0, **settings)
    assert short.activations_gb == pytest.approx(estimate_memory(TINY, cutoff_len=40, **settings).activations_gb)
    assert estimate_memory(TINY, cutoff_len=256, row_tokens=None, **settings) == estimate_memory(TINY, cutoff_len=256,
                                                                                                 **settings)
    assert estimate_memory(TINY, cutoff_len=32, row_tokens=40.0, **settings) == estimate_memory(TINY, cutoff_len=32,
                                                                                                **settings)
    dpo = dict(settings, stage="dpo")  # pairs: TRL pads chosen and rejected to the cutoff, as before
    assert estimate_memory(TINY, cutoff_len=256, row_tokens=40.0, **dpo) == estimate_memory(TINY, cutoff_len=256, **dpo)


RUNS = json.loads((REPO / "docs" / "memory_runs_default.json").read_text())


@pytest.mark.parametrize("run", RUNS, ids=lambda r: "{model_name_or_path}-packing-{packing}".format(**r["settings"]))
def test_the_estimate_follows_the_default_run_and_the_offline_models_with_and_without_packing(run):
    """bench/memory_vs_measured.py --size runs: the real worker on the default run's data (identity rows
    and replay) with SmolLM2-135M-Instruct and gemma-3-270m, packing on and off; the step sized by the
    Plan's measured row tokens. Sized by batch x cutoff_len the default run was +109%."""
    assert run["state"] == "completed" and run["row_tokens"] < run["settings"].get("cutoff_len", 256)
    config = RunConfig(**run["settings"], max_steps=5)
    estimate = estimate_memory(Architecture(**run["architecture"]), gradient_checkpointing=False,
                               **config_estimate_kwargs(config, run["precision"], "cpu", run["row_tokens"]))
    assert estimate.total_gb == pytest.approx(run["peak_rss_gb"], rel=0.15)


def test_the_plan_sizes_the_default_runs_step_by_its_rows(workspace):
    """The Train tab's Plan for the default run on the CPU: the rows measured with the starter's tokenizer
    and template size a packed step (their mean a row) and a padded one (the longest row); with the
    replay cache the replay rows the run picks count too (the bench's row_tokens, measured above)."""
    from backend.models.hardware import Device
    from ui.views.train_summary import dataset_rows, estimate_text, plan_row_tokens

    def msg(key, **values):
        return key + " " + " ".join(f"{k}={v}" for k, v in sorted(values.items()))

    config = RunConfig()  # the starter: SmolLM2-135M-Instruct, identity rows, packing, batch 8 x cutoff 256
    cpu = [Device("cpu", "CPU", 64.0, False, False)]
    rows = dataset_rows(config.dataset, workspace, None, config.model_name_or_path)
    row_tokens = plan_row_tokens(config, rows, workspace)
    assert 30 < row_tokens < 100  # the identity rows' mean, with the template's system prompt
    padded = plan_row_tokens(RunConfig(packing=False), rows, workspace)
    assert row_tokens < padded == max(rows["lengths"]["rows"]) < config.cutoff_len
    arch = architecture_for(config.model_name_or_path, workspace.models_dir)
    sized = estimate_memory(arch, **config_estimate_kwargs(config, "fp32", "cpu", row_tokens)).total_gb
    worst = estimate_memory(arch, **config_estimate_kwargs(config, "fp32", "cpu")).total_gb
    assert f"total={worst}" in estimate_text(msg, config, workspace, cpu)  # rows unmeasured: the worst case
    text = estimate_text(msg, config, workspace, cpu, rows=rows)
    assert f"total={sized}" in text and sized < worst / 2
