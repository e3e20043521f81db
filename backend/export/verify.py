"""The export's own check: reload the exported model from disk and compare its
greedy answers with the checkpoint's, prompt by prompt.

Each answer is one of three outcomes, reported apart and never folded into
each other:

* equal: the exported model answers exactly as the checkpoint does;
* tie: the answers part at a token where the exported model scores the
  checkpoint's token within NEAR_TIE x |top logit| of its own choice. In 16
  bits, merging rounds W + BA once where the adapter path rounds W and BA
  apart, so two near-equal next-token logits can swap: a rounding effect, not
  a broken merge, but the answers still differ;
* differ: any other difference.

The check passes only when every answer is equal. An export with ties (and
no other difference) is kept, with the ties explained; one with a "differ"
is held back for inspection (backend/export/exporter.py).
"""

from __future__ import annotations

from backend.models.chat_templates import render
from backend.models.greedy import greedy_answers
from backend.models.loading import load_model, load_tokenizer

# A swap of two next-token logits closer than this share of the top logit is 16-bit
# rounding (bf16 keeps 8 bits of mantissa: ~0.4% per weight, compounding over layers).
NEAR_TIE = 0.02
VERIFY_NEW_TOKENS = 32
EQUAL, TIE, DIFFER = "equal", "tie", "differ"
PASSED, TIES_ONLY, FAILED = "passed", "ties", "failed"


def verify_export(reference_folder, folder, prompts, dtype, expected=None) -> dict:
    """Reload `folder` as a plain model and compare its greedy answers with `expected`
    (or with those of `reference_folder`); fp32 exports can only be equal or differ."""

    tokenizer = load_tokenizer(folder)
    if expected is None:
        expected = greedy_answers(load_model(reference_folder, dtype=dtype).eval(), tokenizer, prompts,
                                  max_new_tokens=VERIFY_NEW_TOKENS)
    model = load_model(folder, dtype=dtype).eval()
    answers = greedy_answers(model, tokenizer, prompts, max_new_tokens=VERIFY_NEW_TOKENS)
    sixteen_bit = str(model.dtype) in ("torch.bfloat16", "torch.float16")
    rows = []
    for prompt, want, got in zip(prompts, expected, answers):
        gap = None if want == got or not sixteen_bit else _divergence_gap(model, tokenizer, prompt, want, got)
        rows.append(compare_row(prompt[-1]["content"], want, got, gap))
    return judge(rows)


def compare_row(prompt: str, want: str, got: str, gap: tuple[float, float] | None) -> dict:
    """One prompt's outcome. `gap` = (logit gap, top logit) where the answers part (None: not measured)."""
    if want == got:
        outcome = EQUAL
    elif gap is not None and gap[0] < NEAR_TIE * max(1.0, abs(gap[1])):
        outcome = TIE
    else:
        outcome = DIFFER
    return {"prompt": prompt, "expected": want, "exported": got, "outcome": outcome, "equal": outcome == EQUAL,
            "rounding_tie": outcome == TIE, "logit_gap": gap and gap[0], "top_logit": gap and gap[1]}


def judge(rows: list[dict]) -> dict:
    """Counts of each outcome, the verdict and a summary that names all three."""
    counts = {name: sum(r["outcome"] == name for r in rows) for name in (EQUAL, TIE, DIFFER)}
    total = len(rows)
    verdict = PASSED if counts[EQUAL] == total else (TIES_ONLY if counts[DIFFER] == 0 else FAILED)
    summary = (f"{counts[EQUAL]} of {total} greedy answers of the exported model equal the checkpoint's, "
               f"{counts[TIE]} differ after a 16-bit rounding tie, {counts[DIFFER]} differ otherwise.")
    if counts[TIE]:
        summary += (f" A rounding tie: where the answers part, the exported model scores the checkpoint's token "
                    f"within {NEAR_TIE:.0%} of its top logit; merging in 16 bits rounds W + BA once where the "
                    f"adapter rounds W and BA apart, which can swap such near-equal tokens. Export in fp32 for "
                    f"answers equal to the checkpoint's.")
    return {"passed": verdict == PASSED, "verdict": verdict, "equal": counts[EQUAL], "rounding_ties": counts[TIE],
            "differ": counts[DIFFER], "total": total, "rows": rows, "summary": summary}


def _divergence_gap(model, tokenizer, prompt, want: str, got: str) -> tuple[float, float] | None:
    """(logit gap, top logit) in the exported model between its own token and the
    checkpoint's at the first token where the two answers part."""
    import torch

    context = tokenizer(render(tokenizer, prompt, add_generation_prompt=True), add_special_tokens=False)["input_ids"]
    want_ids = tokenizer(want, add_special_tokens=False)["input_ids"]
    got_ids = tokenizer(got, add_special_tokens=False)["input_ids"]
    k = next((i for i, (a, b) in enumerate(zip(want_ids, got_ids)) if a != b), min(len(want_ids), len(got_ids)))
    if k >= len(want_ids):
        return None  # the checkpoint stopped where the export went on: not a tie to judge here
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([context + got_ids[:k]])).logits[0, -1].float()
    return float(logits.max() - logits[want_ids[k]]), float(logits.max())
