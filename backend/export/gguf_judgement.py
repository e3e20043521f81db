"""Each GGUF level judged by its numbers, and the level the Modelfile runs.

A file's name says how many bits it keeps, not how well it answers: on the starter's run
(SmolLM2-135M-Instruct, docs/EVALUATE_EXPORT.md) q5_k_m agreed with the adapter on 5 of 10
answers at a mean KL of 0.25 from f16, worse than q4_k_m (6 of 10, 0.043), because SmolLM2's
576 columns push the k-quants onto 32-block fallbacks. So every level is judged:

* f16 is the reference the others are measured against: it passes when its greedy answers agree
  with the adapter's (transformers + peft) over their first AGREE_TOKENS tokens on F16_AGREEMENT
  of the prompts (16-bit kernels may flip a later near-tie, never the start);
* every other level passes when it does the same on LEVEL_AGREEMENT of the prompts and its mean
  KL divergence from f16's next-token distributions (over the held-out answers) is at most
  LEVEL_MAX_KL.

Each failure is a catalogued sentence naming the number and the bound. The Modelfile's FROM is
the smallest file among the levels asked for that passed: each of them answers like the adapter,
and the smallest loads fastest and fits the most machines.
"""

from __future__ import annotations

import math

from backend.messages import Message, msg

AGREE_TOKENS = 8       # the first tokens of an answer that must match the adapter's
F16_AGREEMENT = 0.9    # f16: on this share of the prompts (9 of 10)
# Measured on the starter's run: q8_0 and q6_k agreed on 9 of 10 (KL 0.0025, 0.0070), the levels a
# user would ship; q4_k_m's 6 and q5_k_m's 5 of 10 answers part from the adapter's within 8 tokens.
LEVEL_AGREEMENT = 0.8  # other levels: on this share of the prompts (8 of 10)
# Nats per token, KL(f16 || level) as llama-perplexity --kl-divergence measures it. 0.1 lies between the
# starter's levels whose distributions stay near f16's (q8_0 0.0025, q6_k 0.0070, q4_k_m 0.043) and
# q5_k_m's 0.25, whose answers parted from the adapter's on half the prompts.
LEVEL_MAX_KL = 0.1


def judge_level(name: str, entry: dict) -> dict:
    """`entry` (a level's measurements: agree_first_8, total, and mean_kl for a level other than f16)
    with `passed` and `failures` (catalogued sentences as dicts) added."""
    reference = name == "f16"
    total = int(entry.get("total") or 0)
    share = F16_AGREEMENT if reference else LEVEL_AGREEMENT
    needed = math.ceil(share * total)
    failures: list[Message] = []
    agree = int(entry.get("agree_first_8") or 0)
    if agree < needed:
        failures.append(msg("gguf_export.level_answers", level=name, agree=agree, total=total, tokens=AGREE_TOKENS,
                            needed=needed))
    kl = entry.get("mean_kl")
    if not reference and kl is not None and kl > LEVEL_MAX_KL:
        failures.append(msg("gguf_export.level_kl", level=name, kl=f"{kl:.3g}", limit=LEVEL_MAX_KL))
    return {**entry, "passed": not failures, "needed_agree": needed,
            "max_kl": None if reference else LEVEL_MAX_KL, "failures": [f.to_dict() for f in failures]}


def modelfile_level(levels: dict[str, dict], sizes: dict[str, int], wanted: list[str]) -> str | None:
    """The smallest file among the levels asked for that passed; None when none did."""
    passed = [name for name in wanted if levels.get(name, {}).get("passed")]
    return min(passed, key=lambda name: sizes[name]) if passed else None


def levels_summary(levels: dict[str, dict], wanted: list[str], chosen: str | None, fallback: str) -> Message:
    """One sentence: which levels failed, and which file the Modelfile runs."""
    failed = [name for name in wanted if not levels[name]["passed"]]
    if not failed:
        return msg("gguf_export.levels_passed", levels=", ".join(wanted), chosen=chosen)
    bounds = dict(share=f"{LEVEL_AGREEMENT:.0%}", tokens=AGREE_TOKENS, kl=LEVEL_MAX_KL)
    if chosen is None:
        return msg("gguf_export.levels_none_passed", levels=", ".join(failed), fallback=fallback, **bounds)
    return msg("gguf_export.levels_failed", levels=", ".join(failed), chosen=chosen, **bounds)
