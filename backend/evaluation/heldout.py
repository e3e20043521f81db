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
from backend.models.greedy import greedy_finished


@dataclass
class HeldOutAnswer:
    prompt: str
    text: str
    ended: bool  # stopped on an end-of-turn token before max_new_tokens


@dataclass
class HeldOutReport:
    identity: float  # share of identity prompts answered with the new name
    kept: float | None  # share of the base's right general answers still right (None without a base)
    ended: float  # share of all answers that ended with the end of turn
    general_right: list[bool] = field(default_factory=list)
    answers: list[HeldOutAnswer] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"identity": self.identity, "kept": self.kept, "ended": self.ended,
                "general_right": sum(self.general_right), "general_total": len(self.general_right)}


def generate(model, tokenizer, prompts, max_new_tokens: int = 128, batch_size: int = 32) -> list[HeldOutAnswer]:
    """Greedy answers to single-turn prompts, in batches (left padding), with whether each ended."""
    finished = greedy_finished(model, tokenizer, [[{"role": "user", "content": p}] for p in prompts],
                               max_new_tokens, batch_size)
    return [HeldOutAnswer(prompt, tokenizer.decode(ids, skip_special_tokens=True).strip(), ended)
            for prompt, (ids, ended) in zip(prompts, finished)]


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
