"""Reward functions of your own for stage grpo (docs/CUSTOMIZE.md).

TRL's signature: f(prompts, completions, **kwargs) -> list[float], one number per
completion (None where the function cannot score one). With conversational data,
each completion is a list of messages: [{"role": "assistant", "content": "..."}].
The data's reference answers come as the `answer` keyword (a list beside the
completions); `completion_ids` holds each completion's token ids. TRL logs the
reward under the function's name: rewards/<name>/mean.
"""

from __future__ import annotations

import re

NUMBER = re.compile(r"-?\d+")


def _text(completion) -> str:
    return completion[0]["content"] if isinstance(completion, list) else str(completion)


def close_to_reference(prompts, completions, answer=None, **kwargs) -> list[float]:
    """Partial credit for a numeric answer: 1 when equal, falling to 0 at 10 off; None without a reference."""
    scores = []
    for completion, reference in zip(completions, answer or [None] * len(completions)):
        numbers = NUMBER.findall(_text(completion))
        if not reference or not NUMBER.fullmatch(str(reference).strip()):
            scores.append(None)
        elif not numbers:
            scores.append(0.0)
        else:
            scores.append(max(0.0, 1.0 - abs(int(numbers[-1]) - int(reference)) / 10))
    return scores


def one_line(prompts, completions, **kwargs) -> list[float]:
    """1 for a completion on a single line."""
    return [float("\n" not in _text(c).strip()) for c in completions]
