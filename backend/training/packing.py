"""Padding-free packing: the rows of a batch concatenated into one row with no
padding, `position_ids` restarting at 0 at each row, and the first label of
each row masked (it would otherwise be predicted from the previous row's last
token).

A batch is the `per_device_train_batch_size` rows the sampler hands over (the
token budget is therefore at most batch x cutoff_len), so the number of
batches per epoch, the learning-rate schedule and the Plan's numbers are the
same as with padded batches; only the padding work disappears.

Correctness needs the model to run without a KV cache (`use_cache=False`,
docs/LIBRARY_TRAPS.md, training): transformers then builds a block-diagonal mask from the
position ids (sdpa, eager, flex) or uses the varlen kernels (FlashAttention).
`packing_works` checks exactly that on the loaded model before training, so
a model or attention implementation that does not support it falls back to
padded, length-grouped batches with a log line instead of training on rows
that attend to each other.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

import torch

from backend.data.encode import IGNORE_INDEX

log = logging.getLogger("backend.train")


@dataclass
class PackedCollator:
    """rows -> {input_ids, labels, position_ids}, each of shape (1, total tokens)."""

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        input_ids, labels, positions = [], [], []
        for row in rows:
            ids = list(row["input_ids"])
            input_ids += ids
            labels += [IGNORE_INDEX] + list(row["labels"])[1:]
            positions += range(len(ids))
        return {
            "input_ids": torch.tensor([input_ids], dtype=torch.long),
            "labels": torch.tensor([labels], dtype=torch.long),
            "position_ids": torch.tensor([positions], dtype=torch.long),
        }


# --- attention over packed rows without a (tokens x tokens) mask -------------------------------
# With a packed row transformers gives sdpa a block-diagonal mask of all the batch's tokens, and
# sdpa with an explicit mask cannot use its flash kernel: on the CPU it materialises the scores,
# (tokens x tokens) per head and layer, for the backward pass (at the 135M size and 8 rows that
# outweighs the padding saved). "packed_sdpa" instead runs sdpa's causal flash kernel once per
# row, so the work and the memory are those of the rows alone.
PACKED_SDPA = "packed_sdpa"


def _sliding(config) -> bool:
    if "sliding_attention" in (getattr(config, "layer_types", None) or []):
        return True
    return getattr(config, "sliding_window", None) is not None and getattr(config, "use_sliding_window", True)


def _packed_mask(*args, attention_mask=None, config=None, **kwargs):
    """No mask for unpadded causal rows (the attention splits them by position ids); else sdpa's own."""
    from transformers.masking_utils import sdpa_mask

    if attention_mask is None and config is not None and not _sliding(config):
        return None
    return sdpa_mask(*args, attention_mask=attention_mask, config=config, **kwargs)


# Not compiled (torch_compile): the row bounds are data, so a traced loop would be specialised on each
# batch's row lengths and recompiled for every batch until dynamo gives up; the layers around it compile.
@torch.compiler.disable
def _packed_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    positions = kwargs.get("position_ids")
    length = query.shape[2]
    if (attention_mask is not None or positions is None or query.shape[0] != 1 or length < 2
            or key.shape[2] != length or positions.shape[-1] != length):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    starts = (positions.reshape(-1) == 0).nonzero().flatten().tolist()
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    bounds = [*starts, length]
    parts = [_attend_row(module, query[:, :, a:b], key[:, :, a:b], value[:, :, a:b], dropout=dropout,
                         scaling=scaling, **kwargs) for a, b in zip(bounds, bounds[1:]) if b > a]
    return torch.cat(parts, dim=1), None  # (batch, tokens, heads, head_dim), as sdpa returns it


# On the CPU, sdpa's flash kernel is slower in bf16 / fp16 than in fp32 on short rows (forward +
# backward, 9 heads of 64, medians: 64 tokens 1.86 ms in bf16 against 0.59 in fp32, 170 tokens 6.45
# against 3.03, about equal at 320, bf16 faster from 384 on; bench/bench_cpu_attention_dtype.py).
# Short rows of a half-precision run therefore attend in fp32, and only their output is cast back.
FP32_ATTENTION_BELOW = 320


def _attend_row(module, query, key, value, **kwargs) -> torch.Tensor:
    """One row's causal attention, (1, tokens, heads, head_dim)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    short_half_on_cpu = (query.device.type == "cpu" and query.dtype in (torch.bfloat16, torch.float16)
                         and query.shape[2] < FP32_ATTENTION_BELOW)
    if not short_half_on_cpu:
        return sdpa_attention_forward(module, query, key, value, None, is_causal=True, **kwargs)[0]
    with torch.autocast("cpu", enabled=False):  # autocast would cast the fp32 inputs back to bf16
        out = sdpa_attention_forward(module, query.float(), key.float(), value.float(), None, is_causal=True,
                                     **kwargs)[0]
    return out.to(query.dtype)


def use_packed_sdpa(model) -> bool:
    """Switch a model that runs sdpa to packed_sdpa; True when switched."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    if getattr(inner.config, "_attn_implementation", None) != "sdpa":
        return False
    AttentionInterface.register(PACKED_SDPA, _packed_sdpa)
    AttentionMaskInterface.register(PACKED_SDPA, _packed_mask)
    inner.set_attn_implementation(PACKED_SDPA)
    return True


def restore_sdpa(model) -> None:
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    if getattr(inner.config, "_attn_implementation", None) == PACKED_SDPA:
        inner.set_attn_implementation("sdpa")


@contextlib.contextmanager
def without_dropout(model):
    """Dropout off for a check, bitsandbytes' layers in training mode. Not model.eval() (nor the
    eval mode a model has right after loading): on the CPU a 4-bit layer's forward in eval mode
    repacks its weights for inference, and training fails on the repacked weights afterwards."""
    before = [(m, m.training) for m in model.modules()]
    for module, _ in before:
        module.training = type(module).__module__.startswith("bitsandbytes")
    try:
        yield
    finally:
        for module, training in before:
            module.training = training


def _tolerance(dtype: torch.dtype) -> float:
    return 1e-4 if dtype == torch.float32 else 5e-2


@torch.no_grad()
def packing_works(model, lengths: tuple[int, ...] = (5, 7)) -> bool:
    """True when the packed forward of a few random rows gives each row's own
    logits (so the rows do not see each other); runs without dropout."""
    try:
        device = model.get_input_embeddings().weight.device
        vocab = model.get_input_embeddings().weight.shape[0]
        generator = torch.Generator().manual_seed(0)
        rows = [torch.randint(0, vocab, (n,), generator=generator).to(device) for n in lengths]
        packed = PackedCollator()([{"input_ids": r.tolist(), "labels": r.tolist()} for r in rows])
        with without_dropout(model):
            alone = [model(input_ids=row[None], use_cache=False).logits[0].float() for row in rows]
            logits = model(input_ids=packed["input_ids"].to(device),
                           position_ids=packed["position_ids"].to(device), use_cache=False).logits[0]
        together = torch.split(logits.float(), list(lengths))
        scale = max(float(a.abs().max()) for a in alone) + 1.0
        error = max(float((a - b).abs().max()) for a, b in zip(alone, together))
        return error <= _tolerance(model.get_input_embeddings().weight.dtype) * scale
    except Exception as error:  # noqa: BLE001 - any failure means: do not pack this model
        log.info("packing check failed: %s", error)
        return False
