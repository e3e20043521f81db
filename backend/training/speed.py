"""The worker's speed and memory choices that depend on the loaded model or
the device: packed or padded batches, and gradient checkpointing "auto".
Each choice is logged in train.log with its reason."""

from __future__ import annotations

import logging

from backend.config import RunConfig
from backend.models.memory import Architecture, choose_checkpointing, config_estimate_kwargs

log = logging.getLogger("backend.train")


def collator_for(config: RunConfig, model, tokenizer):
    """PackedCollator when packing is on and exact for this model; else padded batches."""
    from backend.training.collator import PadToLongest
    from backend.training.packing import PackedCollator, packing_works, restore_sdpa, use_packed_sdpa

    if config.packing:
        per_row = use_packed_sdpa(model)
        if packing_works(model):
            log.info("batches: packed without padding (position ids restart per row; attention %s)",
                     "sdpa per row" if per_row else model.config._attn_implementation)
            return PackedCollator()
        restore_sdpa(model)
        log.warning("packing is off for this model: its packed forward does not match the rows run alone "
                    "(attention implementation %s); using length-grouped padded batches instead",
                    getattr(model.config, "_attn_implementation", "unknown"))
    else:
        log.info("batches: padded to the longest row (packing off)")
    return PadToLongest(tokenizer.pad_token_id)


def checkpointing_for(config: RunConfig, model_path: str, precision: str, devices: list,
                      row_tokens: float | None = None) -> bool:
    """gradient_checkpointing as a bool: "auto" asks the memory estimate for the smallest device, a
    step sized by `row_tokens` (the encoded rows' step_row_tokens; None: cutoff_len), as the Plan does."""

    if config.gradient_checkpointing in (True, False):
        return config.gradient_checkpointing
    try:
        arch = Architecture.from_folder(model_path)
    except ValueError as error:
        log.info("gradient checkpointing: auto -> off (no estimate: %s)", error)
        return False
    device = min(devices, key=lambda d: d.memory_gb)
    kind = "cpu" if device.id == "cpu" else "cuda"
    on, why = choose_checkpointing("auto", device.memory_gb, arch=arch,
                                   **config_estimate_kwargs(config, precision, kind, row_tokens))
    log.info("gradient checkpointing: %s", why)
    return on
