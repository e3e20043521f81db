"""Whether a model found on disk can be trained here: transformers can read it, and it fits.

The GGUF checks are the conversion's own (backend/models/gguf_source.py, read_gguf_info): the same
refusals, the same message ids, decided from the bounded header instead of gguf's reader. The fit is
the memory estimate (backend/models/memory.py) of a run with RunConfig's default settings on the
smallest device this machine trains on.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from backend.messages import Message, msg
from backend.models.hardware import resolve_precision, training_devices
from backend.models.import_lock import FIRST_IMPORT_LOCK
from backend.models.memory import Architecture, EstimateUnavailable, choose_checkpointing, estimate_memory

# RunConfig's defaults as estimate_memory's arguments (backend/config.py is a floor above this one;
# tests/test_local_models.py checks these equal config_estimate_kwargs(RunConfig())).
FIT_SETTINGS = dict(method="lora", batch_size=8, cutoff_len=256, quantization_bits=None, lora_r=16,
                    lora_target="all-linear", lora_dropout=0.0, optim="auto", stage="sft", chunked_loss=True,
                    gradient_accumulation_steps=1, max_completion_length=0, beta=0.1,
                    row_tokens=None)  # no rows measured for a model's fit: batch x cutoff, the worst case


@functools.cache
def supported_gguf_architectures() -> tuple[str, ...]:
    """The architectures transformers' GGUF loader reads: GGUF_SUPPORTED_ARCHITECTURES is this
    mapping's keys; imported from here it costs about a second and no torch."""
    with FIRST_IMPORT_LOCK:  # the app's warm-up may be importing transformers in another thread
        from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    return tuple(sorted(set(GGUF_CONFIG_MAPPING) - {"general", "tokenizer"}))


def _plain(architecture: str) -> str:
    """llama.cpp writes qwen2moe where transformers says qwen2_moe (as gguf_source compares them)."""
    return architecture.replace("-", "").replace("_", "").lower()


def gguf_refusal(path: Path, fields: dict, supported: tuple[str, ...]) -> Message | None:
    """Why transformers cannot train this GGUF file (the conversion's own sentence), else None."""

    kind = str(fields.get("general.type") or "model")
    architecture = str(fields.get("general.architecture") or "")
    if re.search(r"-\d{5}-of-\d{5}\.gguf$", path.name) or int(fields.get("split.count") or 1) > 1:
        return msg("gguf.split", path=path)
    if kind == "adapter" or "adapter.type" in fields:
        return msg("gguf.adapter", path=path)
    if kind == "mmproj" or architecture == "clip":
        return msg("gguf.mmproj", path=path)
    if _plain(architecture) not in {_plain(a) for a in supported}:
        return msg("gguf.architecture", path=path, architecture=architecture or "unknown",
                   supported=", ".join(supported))
    return None


def gguf_config(fields: dict, arrays: dict, tensor_names: set[str]) -> dict:
    """config.json's architecture numbers from a GGUF header (llama.cpp's key names), for the estimate."""
    arch = str(fields.get("general.architecture") or "")

    def key(name):
        return fields.get(f"{arch}.{name}")

    config = {"hidden_size": key("embedding_length"), "intermediate_size": key("feed_forward_length"),
              "num_hidden_layers": key("block_count"), "num_attention_heads": key("attention.head_count"),
              "num_key_value_heads": key("attention.head_count_kv"), "head_dim": key("attention.key_length"),
              "vocab_size": key("vocab_size") or arrays.get("tokenizer.ggml.tokens"),
              "tie_word_embeddings": "output.weight" not in tensor_names}
    return {k: v for k, v in config.items() if v is not None}


def fit_on(config: dict, devices: list) -> tuple[bool | None, float | None, str | None]:
    """(fits, estimated GiB, device name) of a default run (devices auto: the GPUs, else the CPU; the
    smallest decides) among `devices` (detect_devices()); (None, None, None) without an estimate."""

    devices = training_devices("auto", devices)
    if not devices or not config:
        return None, None, None
    try:
        arch = Architecture.from_config(config)
    except EstimateUnavailable:
        return None, None, None
    device = min(devices, key=lambda d: d.memory_gb)
    kind = "cpu" if device.id == "cpu" else "cuda"
    precision = resolve_precision("auto", [device])
    settings = {**FIT_SETTINGS, "precision": precision, "device_kind": kind}
    checkpointing, _ = choose_checkpointing("auto", device.memory_gb, arch=arch, **settings)
    estimate = estimate_memory(arch, gradient_checkpointing=checkpointing, **settings)
    return estimate.fits(device.memory_gb), round(estimate.total_gb, 2), device.name
