"""The causal-LM loss without the full-vocabulary logits.

A plain forward computes `lm_head` for every position (prompt positions too,
although their labels are masked) and the loss keeps float copies of those
(positions x vocabulary) logits for the backward pass: at the 135M size with
a 49k vocabulary that is most of the peak memory. Here the head runs only on
the positions that have a label, in chunks, and the gradient of each chunk is
computed right away (the way Liger's fused linear cross-entropy does it on
CUDA), so no logits outlive their chunk: what is kept for the backward pass
is the gradient of the hidden states (positions x hidden), not the logits.

`deferred_head` makes the model return its final hidden states in place of
the logits (the head's forward is swapped for the identity during the call),
so the whole forward still goes through the model's own code and wrappers
(PEFT, DDP, the Trainer's autocast). Apple's cut-cross-entropy does the same
job in a Triton kernel, which needs CUDA; Liger's version is used on CUDA
through `use_liger_kernel`. This plain-torch version runs everywhere.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from backend.data.encode import IGNORE_INDEX

CHUNK_BYTES = 64 * 2**20  # float32 logits per chunk


def chunk_rows(vocab_size: int) -> int:
    return max(64, CHUNK_BYTES // (4 * vocab_size))


class _FusedLinearCrossEntropy(torch.autograd.Function):
    """sum over rows of cross_entropy(hidden @ weight.T + bias, targets), gradients computed in forward."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, chunk):
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        need_b = bias is not None and ctx.needs_input_grad[2]
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_h = torch.empty_like(hidden) if need_h else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
        grad_b = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if need_b else None
        for start in range(0, hidden.shape[0], chunk):
            h = hidden[start:start + chunk].to(weight.dtype)
            t = targets[start:start + chunk]
            logits = F.linear(h, weight, bias).float()
            lse = torch.logsumexp(logits, dim=-1)
            total += (lse - logits.gather(1, t[:, None]).squeeze(1)).sum()
            if not (need_h or need_w or need_b):
                continue
            # d(sum of losses) / d logits = softmax - one_hot(target), computed in place.
            grad = logits.sub_(lse[:, None]).exp_()
            grad[torch.arange(t.shape[0], device=t.device), t] -= 1.0
            if need_b:
                grad_b += grad.sum(0)
            grad = grad.to(weight.dtype)
            if need_h:
                grad_h[start:start + chunk] = (grad @ weight).to(hidden.dtype)
            if need_w:
                grad_w += (grad.t() @ h).float()
        ctx.save_for_backward(grad_h, grad_w, grad_b)
        return total

    @staticmethod
    def backward(ctx, grad_output):
        grad_h, grad_w, grad_b = ctx.saved_tensors
        scale = grad_output.float()
        return (None if grad_h is None else grad_h * scale.to(grad_h.dtype),
                None if grad_w is None else grad_w * scale,
                None if grad_b is None else grad_b * scale,
                None, None)


def causal_lm_loss(hidden: torch.Tensor, head: torch.nn.Linear, labels: torch.Tensor,
                   num_items_in_batch=None) -> torch.Tensor:
    """The shifted next-token cross-entropy of `hidden` (batch, seq, hidden) through `head`,
    reduced like transformers' ForCausalLMLoss: a sum over labelled positions divided by
    `num_items_in_batch` when given (gradient accumulation), else their mean."""
    targets = labels[:, 1:].to(hidden.device)
    keep = targets != IGNORE_INDEX
    selected = hidden[:, :-1][keep]
    targets = targets[keep]
    total = _FusedLinearCrossEntropy.apply(selected, head.weight, head.bias, targets,
                                           chunk_rows(head.weight.shape[0]))
    divisor = num_items_in_batch if num_items_in_batch is not None else max(int(targets.numel()), 1)
    if torch.is_tensor(divisor):
        divisor = divisor.to(total.device)
    return total / divisor


def _identity(hidden: torch.Tensor) -> torch.Tensor:
    return hidden


@contextlib.contextmanager
def deferred_head(head: torch.nn.Module):
    """During the block the head returns its input: the model's `logits` are its final hidden states."""
    head.forward = _identity
    try:
        yield
    finally:
        del head.forward


def output_head(model) -> torch.nn.Linear | None:
    """The model's plain (un-adapted, un-quantised) lm_head, or None when the chunked loss cannot use it."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    get = getattr(inner, "get_output_embeddings", None)
    head = get() if get else None
    return head if type(head) is torch.nn.Linear else None


@torch.no_grad()
def chunked_loss_works(model, head: torch.nn.Linear) -> bool:
    """True when hidden states through `head` give the model's own logits (no softcapping,
    logit scaling or other step after the head that the chunked loss would skip)."""
    from backend.training.packing import without_dropout

    try:
        device = head.weight.device
        ids = torch.randint(0, head.weight.shape[0], (1, 6), generator=torch.Generator().manual_seed(0)).to(device)
        with without_dropout(model):
            logits = model(input_ids=ids, use_cache=False).logits.float()
            with deferred_head(head):
                hidden = model(input_ids=ids, use_cache=False).logits
        if hidden.shape[-1] != head.weight.shape[1]:
            return False
        again = F.linear(hidden.to(head.weight.dtype), head.weight, head.bias).float()
        tolerance = 1e-4 if head.weight.dtype == torch.float32 else 5e-2
        return float((logits - again).abs().max()) <= tolerance * (float(logits.abs().max()) + 1.0)
    except Exception:  # noqa: BLE001 - anything unexpected: keep the model's own loss
        return False
