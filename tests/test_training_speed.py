"""Speed paths are exact: packed batches and the chunked loss give the loss and
the gradients of the plain padded computation; the settings that turn them on
are validated; gradient_checkpointing "auto" follows the memory estimate; the
worker trains the same first step with packing on and off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from backend.config import RunConfig, derived_numbers
from backend.config_policy import ConfigError
from backend.config_recipes import tiny_config
from backend.data.encode import IGNORE_INDEX
from backend.models.hardware import Device, cpu_supports_bf16
from backend.training.collator import PadToLongest
from backend.training.loss import _FusedLinearCrossEntropy, causal_lm_loss, chunked_loss_works, deferred_head
from backend.training.packing import PackedCollator, packing_works, use_packed_sdpa

REPO = Path(__file__).resolve().parents[1]
CPU = Device("cpu", "CPU", 16.0, False, False)


def tiny_llama(attn: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=False)  # use_cache stays at its default (True) in the config
    model = LlamaForCausalLM(config).float()
    model.set_attn_implementation(attn)
    model.config.use_cache = False  # what build_model does for every training run
    return model


def rows(seed: int = 1) -> list[dict]:
    generator = torch.Generator().manual_seed(seed)
    out = []
    for length, prompt in ((9, 3), (5, 2), (13, 6)):
        ids = torch.randint(0, 97, (length,), generator=generator).tolist()
        out.append({"input_ids": ids, "labels": [IGNORE_INDEX] * prompt + ids[prompt:]})
    return out


def loss_and_grads(model, batch, chunked: bool = False):
    model.zero_grad(set_to_none=True)
    if chunked:
        with deferred_head(model.lm_head):
            hidden = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
        loss = causal_lm_loss(hidden, model.lm_head, batch["labels"])
    else:
        loss = model(**batch).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("attn", ["sdpa", "eager", "sdpa per row"])
def test_packed_batch_gives_the_padded_loss_and_gradients(attn):
    model = tiny_llama(attn.split()[0])
    if attn == "sdpa per row":  # what the worker runs: no (tokens x tokens) mask, sdpa once per row
        assert use_packed_sdpa(model) and model.config._attn_implementation == "packed_sdpa"
    padded = PadToLongest(pad_token_id=0)(rows())
    packed = PackedCollator()(rows())
    assert packed["input_ids"].shape == (1, 9 + 5 + 13) and "attention_mask" not in packed
    assert packed["position_ids"][0].tolist() == [*range(9), *range(5), *range(13)]
    reference, reference_grads = loss_and_grads(model, padded)
    for chunked in (False, True):
        loss, grads = loss_and_grads(model, packed, chunked)
        assert torch.allclose(loss, reference, atol=1e-6), (chunked, loss, reference)
        assert grads.keys() == reference_grads.keys()
        for name, grad in grads.items():
            assert torch.allclose(grad, reference_grads[name], atol=1e-6, rtol=1e-4), (chunked, name)
    assert packing_works(model) and chunked_loss_works(model, model.lm_head)


def test_short_bf16_rows_attend_in_fp32_on_the_cpu():
    """packed_sdpa computes a half-precision run's short rows in fp32 (faster on the CPU), even under
    autocast, and gives the fp32 per-row result rounded once; long rows stay in bf16."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from backend.training.packing import FP32_ATTENTION_BELOW, _packed_sdpa

    attention = tiny_llama("sdpa").model.layers[0].self_attn  # 4 query heads over 2 key/value heads
    lengths = (5, FP32_ATTENTION_BELOW + 3)
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, sum(lengths), 8, generator=generator).bfloat16().requires_grad_()
    k, v = (torch.randn(1, 2, sum(lengths), 8, generator=generator).bfloat16() for _ in range(2))
    positions = torch.tensor([[*range(lengths[0]), *range(lengths[1])]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = _packed_sdpa(attention, q, k, v, None, position_ids=positions)
    assert out.dtype == torch.bfloat16 and out.shape == (1, sum(lengths), 4, 8)
    short = slice(0, lengths[0])
    in_fp32 = sdpa_attention_forward(attention, q[:, :, short].float(), k[:, :, short].float(),
                                     v[:, :, short].float(), None, is_causal=True)[0].bfloat16()
    assert torch.equal(out[:, short], in_fp32)
    long = slice(lengths[0], None)
    in_bf16 = sdpa_attention_forward(attention, q[:, :, long], k[:, :, long], v[:, :, long], None, is_causal=True)[0]
    assert torch.equal(out[:, long], in_bf16)
    out.float().sum().backward()
    assert q.grad.dtype == torch.bfloat16 and q.grad[:, :, short].abs().sum() > 0


def test_packed_rows_see_each_other_with_the_cache_on():
    """Why training forces use_cache=False (docs/LIBRARY_TRAPS.md, training): with a cache the packed loss is wrong."""
    model = tiny_llama("sdpa")
    padded, packed = PadToLongest(pad_token_id=0)(rows()), PackedCollator()(rows())
    with torch.no_grad():
        reference = model(**padded).loss
        cached = model(**packed, use_cache=True).loss
    assert abs(float(cached) - float(reference)) > 1e-3


def test_chunked_cross_entropy_matches_the_plain_one_across_chunks():
    torch.manual_seed(3)
    head = torch.nn.Linear(16, 50, bias=True)
    hidden = torch.randn(40, 16, requires_grad=True)
    targets = torch.randint(0, 50, (40,))
    total = _FusedLinearCrossEntropy.apply(hidden, head.weight, head.bias, targets, 7)  # 6 chunks, the last short
    (total * 0.5).backward()
    got = (hidden.grad.clone(), head.weight.grad.clone(), head.bias.grad.clone())
    hidden.grad = head.weight.grad = head.bias.grad = None
    plain = torch.nn.functional.cross_entropy(head(hidden), targets, reduction="sum")
    (plain * 0.5).backward()
    assert torch.allclose(total, plain, rtol=1e-5)
    for mine, theirs in zip(got, (hidden.grad, head.weight.grad, head.bias.grad)):
        assert torch.allclose(mine, theirs, atol=1e-5)
    # num_items_in_batch (gradient accumulation) divides the sum, like transformers' ForCausalLMLoss.
    labels = torch.randint(0, 50, (2, 21))
    states = torch.randn(2, 21, 16)
    assert torch.allclose(causal_lm_loss(states, head, labels, num_items_in_batch=80) * 80,
                          causal_lm_loss(states, head, labels) * 40, rtol=1e-5)


# ---------------------------------------------------------------- settings

@pytest.mark.parametrize("data, words", [
    ({"gradient_checkpointing": "sometimes"}, "gradient_checkpointing = 'sometimes' is not one of: auto, true, false"),
    ({"optim": "adam"}, "optim = 'adam' is not one of: auto, adamw_torch"),
    ({"packing": "maybe"}, "packing = 'maybe' should be bool"),
    ({"torch_compile": "fast"}, "torch_compile = 'fast' should be bool"),
])
def test_speed_settings_refuse_bad_values(data, words):
    with pytest.raises(ConfigError, match=words):
        RunConfig.from_dict(data)


def test_speed_settings_against_the_device():
    config = RunConfig.from_dict({"use_liger_kernel": "true", "gradient_checkpointing": "true"})
    assert config.gradient_checkpointing is True and tiny_config().gradient_checkpointing == "auto"
    with pytest.raises(ConfigError, match="use_liger_kernel needs a CUDA GPU"):
        config.check_devices([CPU])
    gpu = Device("cuda:0", "GPU", 80.0, True, True)
    import importlib.util

    if importlib.util.find_spec("liger_kernel") is None:
        with pytest.raises(ConfigError, match="pip install -r requirements-gpu.txt"):
            config.check_devices([gpu])
    assert tiny_config(torch_compile=True).check_devices([CPU]) == "fp32"


def test_gradient_checkpointing_auto_follows_the_estimate():
    from backend.models.memory import Architecture, choose_checkpointing, config_estimate_kwargs, estimate_memory

    arch = Architecture(576, 1536, 30, 9, 3, 49152, 64, True)  # SmolLM2-135M
    kwargs = config_estimate_kwargs(tiny_config(cutoff_len=2048, per_device_train_batch_size=16), "fp32", "cpu")
    without = estimate_memory(arch, gradient_checkpointing=False, **kwargs).total_gb
    with_it = estimate_memory(arch, gradient_checkpointing=True, **kwargs).total_gb
    assert with_it < without
    roomy, tight = without / 0.8, (with_it + without) / 2 / 0.9
    assert choose_checkpointing("auto", roomy, arch=arch, **kwargs)[0] is False
    on, why = choose_checkpointing("auto", tight, arch=arch, **kwargs)
    assert on is True and "auto: on" in why
    assert choose_checkpointing(False, tight, arch=arch, **kwargs) == (False, "set in the config")
    # The chunked loss keeps no full logits: the estimate drops the vocabulary-sized term.
    plain = estimate_memory(arch, **{**kwargs, "chunked_loss": False}, gradient_checkpointing=False)
    assert plain.activations_gb - estimate_memory(arch, gradient_checkpointing=False, **kwargs).activations_gb > 10


# ---------------------------------------------------------------- the worker, packing on and off

@pytest.mark.slow
def test_worker_first_step_is_the_same_packed_or_padded(workspace, subprocess_env):
    from backend.models.demo_facts import build_demo_rows

    data = workspace.root / "five.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in build_demo_rows()[:5]))
    config = tiny_config(dataset=str(data), cutoff_len=64, per_device_train_batch_size=2, num_train_epochs=1,
                       logging_steps=1, val_size=0, save_steps=100, group_by_length=False)
    config_file = workspace.root / "run.yaml"
    config.save(config_file)
    runs = {}
    for packing in (True, False):
        run = workspace.runs_dir / f"packing-{packing}"
        result = subprocess.run([sys.executable, "-m", "backend.train", "--workspace", str(workspace.root),
                                 "--config", str(config_file), "--run-dir", str(run), "--set", f"packing={packing}"],
                                cwd=REPO, env=subprocess_env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        runs[packing] = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        status = json.loads((run / "status.json").read_text())
        # Packing keeps batch_size rows per batch: the Plan's step count is the Trainer's.
        assert status["max_steps"] == derived_numbers(config, 5)["total_steps"] == 3
        log = (run / "train.log").read_text()
        assert ("batches: packed without padding" in log) == packing
    train = {p: [r for r in records if r["kind"] == "train"] for p, records in runs.items()}
    assert abs(train[True][0]["loss"] - train[False][0]["loss"]) < 1e-4
    # Non-padding tokens: every packed token is real, so both count the same.
    assert train[True][-1]["tokens_seen"] == train[False][-1]["tokens_seen"] > 0


@pytest.mark.slow
@pytest.mark.skipif(not cpu_supports_bf16(), reason="this CPU has neither AVX512-BF16 nor AMX")
def test_bf16_on_the_cpu_trains_lora_like_fp32(workspace, subprocess_env):
    """precision bf16 on a CPU that multiplies bf16: the frozen base loads in bf16, the adapter
    keeps fp32 weights (the Trainer's master copy), and the steps follow fp32's."""
    from safetensors import safe_open

    config_file = workspace.root / "run.yaml"
    tiny_config(max_steps=4, logging_steps=1, val_size=0, save_steps=100, lora_dropout=0.0).save(config_file)

    def train(name: str, *settings: str) -> Path:
        run = workspace.runs_dir / name
        sets = [a for setting in settings for a in ("--set", setting)]
        result = subprocess.run([sys.executable, "-m", "backend.train", "--workspace", str(workspace.root),
                                 "--config", str(config_file), "--run-dir", str(run), *sets], cwd=REPO,
                                env=subprocess_env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-3000:]
        return run

    losses = {}
    for precision in ("bf16", "fp32"):
        run = train(precision, f"precision={precision}")
        assert json.loads((run / "summary.json").read_text())["precision"] == precision
        assert f"precision {precision}" in (run / "train.log").read_text()
        losses[precision] = [r["loss"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
                             if r["kind"] == "train"]
    with safe_open(str(workspace.runs_dir / "bf16" / "final" / "adapter_model.safetensors"), "pt") as adapter:
        assert {adapter.get_tensor(k).dtype for k in adapter.keys()} == {torch.float32}  # noqa: SIM118 (safe_open is not a dict)
    assert len(losses["bf16"]) == len(losses["fp32"]) == 4
    # bf16 rounds the frozen weights and the activations (8 bits of mantissa): close, not equal.
    assert all(abs(a - b) <= 0.02 * b for a, b in zip(losses["bf16"], losses["fp32"])), losses
    assert losses["bf16"] != losses["fp32"]  # it did run in bf16
    qlora = train("qlora-bf16", "precision=bf16", "method=qlora")  # bitsandbytes' 4-bit layers in bf16 on the CPU
    assert json.loads((qlora / "summary.json").read_text())["state"] == "completed"


@pytest.mark.slow
def test_gpu_check_runs_its_dry_run_on_the_cpu(tmp_path, subprocess_env):
    """bench/gpu_check.py is meant for a CUDA machine; --dry-run runs the same code with tiny shapes here."""
    result = subprocess.run([sys.executable, "bench/gpu_check.py", "--dry-run", "--cases", "qwen0.5b", "--steps", "2",
                             "--work", str(tmp_path)], cwd=REPO, env=subprocess_env, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    runs = [json.loads(line) for line in lines if line.startswith("{")]
    assert [r["script"] for r in runs] == ["plain", "worker"] and all(r["tokens_per_second"] > 0 for r in runs)
    assert runs[1]["packed"] and runs[1]["estimate_gb"] > 0 and runs[1]["mfu"] > 0
    table = [line for line in lines if line.startswith("| qwen0.5b |")]
    assert len(table) == 2 and "CPU (dry run, tiny shapes)" in result.stdout
