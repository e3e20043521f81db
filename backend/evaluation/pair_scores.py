"""Preference metrics of a checkpoint on held-out pairs (the Evaluate tab and
`python -m backend.evaluate` for runs of a preference stage).

For each pair the summed log-probability of the chosen and of the rejected
answer (answer tokens only, after the chat template, cut at cutoff_len) is
computed under the checkpoint and under the run's reference: the base model
(adapters disabled), or the SFT adapter the run started from (init_adapter).
  preference_accuracy  share of pairs whose implicit reward margin
                       (log-ratio to the reference of chosen minus that of
                       rejected) is above 0; a tie counts one half, so the
                       reference itself scores 0.5 (chance)
  mean_margin          beta x the mean of that margin (TRL's rewards/margins)
  logp_accuracy        share of pairs where the checkpoint gives the chosen
                       answer the higher log-probability (no reference)
"""

from __future__ import annotations

from pathlib import Path

REFERENCE = "reference"


def pair_rows(rows: list[dict]) -> list[dict]:
    """Pairs of preference rows (KTO rows have no pair: they are left out)."""
    return [r for r in rows if "chosen" in r and "rejected" in r]


def answer_logps(model, tokenizer, prompts: list[list[dict]], answers: list[list[dict]], cutoff_len: int,
                 batch_size: int = 8) -> list[float]:
    """Summed log-probability of each answer's tokens given its prompt."""
    import torch

    encoded = []
    for prompt, answer in zip(prompts, answers):
        head = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=False)
        full = tokenizer.apply_chat_template(prompt + answer, tokenize=True, return_dict=False)[:cutoff_len]
        encoded.append((full, min(len(head), len(full))))
    device = next(model.parameters()).device
    out: list[float] = []
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start:start + batch_size]
        width = max(len(ids) for ids, _ in chunk)
        pad = tokenizer.pad_token_id or 0
        ids = torch.tensor([i + [pad] * (width - len(i)) for i, _ in chunk], device=device)
        mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i, _ in chunk], device=device)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
        logps = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        for row, (tokens, head) in enumerate(chunk):
            # Position t predicts token t+1: answer tokens are head..len-1.
            out.append(float(logps[row, head - 1:len(tokens) - 1].sum()))
    return out


def pair_logps(model, tokenizer, pairs: list[dict], cutoff_len: int, batch_size: int = 8) -> tuple[list, list]:
    prompts = [p["prompt"] for p in pairs]
    chosen = answer_logps(model, tokenizer, prompts, [p["chosen"] for p in pairs], cutoff_len, batch_size)
    rejected = answer_logps(model, tokenizer, prompts, [p["rejected"] for p in pairs], cutoff_len, batch_size)
    return chosen, rejected


def preference_scores(policy: tuple[list, list], reference: tuple[list, list], beta: float) -> dict:
    (pc, pr), (rc, rr) = policy, reference
    margins = [(a - c) - (b - d) for a, b, c, d in zip(pc, pr, rc, rr)]
    n = len(margins)
    wins = sum(1.0 if m > 1e-6 else 0.5 if abs(m) <= 1e-6 else 0.0 for m in margins)
    return {"preference_accuracy": round(wins / n, 4) if n else None,
            "mean_margin": round(beta * sum(margins) / n, 4) if n else None,
            "logp_accuracy": round(sum(a > b for a, b in zip(pc, pr)) / n, 4) if n else None,
            "num_pairs": n}


def reference_model(models, init_adapter: Path | None):
    """The run's reference on the ModelSet's base: the base itself, or the init adapter attached by name."""
    if init_adapter is None:
        return models.model_for("base")
    return models.adapter_model(Path(init_adapter), REFERENCE)
