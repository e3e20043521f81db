"""Did a fine-tune learn its new identity without forgetting? Greedy answers to
prompts that never trained (backend/data/identity_rows.py HELD_OUT_IDENTITY_PROMPTS,
backend/data/general_prompts.py HELD_OUT_QUESTIONS), scored three ways:

* identity: the share of identity prompts whose answer names the new name;
* kept: of the general questions the base answers right, the share the
  fine-tune still answers right (a question the base gets wrong measures
  nothing about forgetting, so it is left out);
* ended: the share of answers that end with the end of turn before
  max_new_tokens (a model that never stops is broken whatever it says);
  128 tokens, the limit replay's answers were kept under.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.data.general_prompts import HELD_OUT_QUESTIONS
from backend.data.identity_rows import HELD_OUT_IDENTITY_PROMPTS
from backend.models.chat_templates import render, stop_token_ids


@dataclass
class Answer:
    prompt: str
    text: str
    ended: bool  # stopped on an end-of-turn token before max_new_tokens


@dataclass
class HeldOutReport:
    identity: float  # share of identity prompts answered with the new name
    kept: float | None  # share of the base's right general answers still right (None without a base)
    ended: float  # share of all answers that ended with the end of turn
    general_right: list[bool] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"identity": self.identity, "kept": self.kept, "ended": self.ended,
                "general_right": sum(self.general_right), "general_total": len(self.general_right)}


def generate(model, tokenizer, prompts, max_new_tokens: int = 128, batch_size: int = 32) -> list[Answer]:
    """Greedy answers to single-turn prompts, in batches (left padding), with whether each ended."""
    import torch

    stop = stop_token_ids(tokenizer, model.generation_config)
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    device = next(model.parameters()).device
    answers = []
    try:
        for start in range(0, len(prompts), batch_size):
            batch = list(prompts[start:start + batch_size])
            texts = [render(tokenizer, [{"role": "user", "content": p}], add_generation_prompt=True) for p in batch]
            inputs = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            with torch.inference_mode():
                output = model.generate(**inputs, do_sample=False, max_new_tokens=max_new_tokens,
                                        eos_token_id=stop, pad_token_id=tokenizer.pad_token_id)
            for prompt, ids in zip(batch, output[:, inputs["input_ids"].shape[1]:].tolist()):
                end = next((i for i, token in enumerate(ids) if token in stop), None)
                text = tokenizer.decode(ids[:end] if end is not None else ids, skip_special_tokens=True).strip()
                answers.append(Answer(prompt, text, end is not None))
    finally:
        tokenizer.padding_side = side
    return answers


def names_identity(text: str, name: str) -> bool:
    """The answer names `name` (an empty name is named by no answer: nothing was taught)."""
    return bool(name) and name.lower() in text.lower()


def is_right(text: str, accepted: tuple[str, ...]) -> bool:
    return any(a.lower() in text.lower() for a in accepted)


def held_out_report(model, tokenizer, name: str, base_right: list[bool] | None = None,
                    max_new_tokens: int = 128) -> HeldOutReport:
    """Scores `model` on the held-out prompts. `base_right` (the base model's `general_right`)
    selects the general questions that count for `kept`."""
    identity = generate(model, tokenizer, HELD_OUT_IDENTITY_PROMPTS, max_new_tokens)
    general = generate(model, tokenizer, [q for q, _ in HELD_OUT_QUESTIONS], max_new_tokens)
    right = [is_right(a.text, accepted) for a, (_, accepted) in zip(general, HELD_OUT_QUESTIONS)]
    kept = None
    if base_right is not None:
        counted = [now for now, before in zip(right, base_right) if before]
        kept = sum(counted) / len(counted) if counted else None
    answers = identity + general
    return HeldOutReport(identity=sum(names_identity(a.text, name) for a in identity) / len(identity),
                         kept=kept, ended=sum(a.ended for a in answers) / len(answers), general_right=right,
                         answers=answers)
