"""What is measured on a written GGUF file: its metadata, its answers, its distributions."""

from __future__ import annotations

from pathlib import Path


def metadata_check(path: Path, tokenizer, stop_ids) -> dict:
    """The chat template and EOS the file carries, read back with gguf's reader, against the run's tokenizer."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    template = _field(reader, "tokenizer.chat_template")
    eos = _field(reader, "tokenizer.ggml.eos_token_id")
    expected = tokenizer.chat_template
    template_ok = template == expected
    eos_ok = eos is not None and int(eos) in set(stop_ids)
    return {"chat_template_same": template_ok, "eos_token_id": eos, "eos_is_a_stop_token": eos_ok,
            "architecture": _field(reader, "general.architecture"), "passed": template_ok and eos_ok}


def _field(reader, key: str):
    field = reader.get_field(key)
    if field is None:
        return None
    value = field.contents()
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def compare_answers(want: list[int], got: list[int], tokenizer) -> dict:
    """Where two greedy answers (token ids) part: the count of equal first tokens, and both texts."""
    same = 0
    for a, b in zip(want, got):
        if a != b:
            break
        same += 1
    return {"equal": want == got, "agree_first": same, "reference_tokens": len(want), "gguf_tokens": len(got),
            "reference": tokenizer.decode(want, skip_special_tokens=True).strip(),
            "gguf": tokenizer.decode(got, skip_special_tokens=True).strip()}


def distribution_stats(reference_logits: list, logits: list) -> dict:
    """Mean KL(reference || level) over every answer position, and how often both pick the same top token."""
    import numpy as np

    kl_sum, top1, positions = 0.0, 0, 0
    for ref, cand in zip(reference_logits, logits):
        rows = min(len(ref), len(cand))
        if rows == 0:
            continue
        p_log = _log_softmax(np.asarray(ref[:rows], dtype=np.float64))
        q_log = _log_softmax(np.asarray(cand[:rows], dtype=np.float64))
        kl_sum += float((np.exp(p_log) * (p_log - q_log)).sum())
        top1 += int((p_log.argmax(axis=1) == q_log.argmax(axis=1)).sum())
        positions += rows
    return {"mean_kl": round(kl_sum / positions, 6) if positions else None,
            "top1_agreement": round(top1 / positions, 4) if positions else None, "positions": positions}


def _log_softmax(x):
    import numpy as np

    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))
