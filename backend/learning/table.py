"""The learning report as text (the command line) and as plain rows (the UI's
tables and charts): what each number was measured on, said beside it."""

from __future__ import annotations

from backend.learning.entries import summary_rows
from backend.learning.questions import MIN_HELD_OUT_ROWS, MIN_KEPT
from backend.messages import Message, msg


def source_lines(report: dict) -> list[Message]:
    """What "learned" was measured on: the held-out split or the training rows (and why), and the
    identity questions when the data teaches an identity."""
    rows_asked = report.get("learned_prompts", 0) - report.get("identity_prompts", 0)
    lines = [msg(f"learning.source.{report.get('source', 'held-out')}", learned=rows_asked,
                 rows=report.get("rows", 0), minimum=MIN_HELD_OUT_ROWS)]
    if report.get("identity_prompts"):
        name = next((e["reference"] for c in report.get("checkpoints", []) for e in c["examples"]
                     if e.get("source") == "identity"), "")
        lines.append(msg("learning.identity", count=report["identity_prompts"], name=name))
    base = next((e for e in report.get("checkpoints", []) if e["checkpoint"] == "base"), None)
    if base is not None and base["kept"]["n"] < MIN_KEPT:
        lines.append(msg("learning.kept_unmeasured", right=base["kept"]["n"], asked=base["kept"].get("of", 0),
                         minimum=MIN_KEPT))
    return lines


# The goals of docs/DEMO.md: below them the report says what to change. gemma-3-270m on 200 alpaca rows
# ended 22 of 24 (92%): two answers looped or listed to the limit, which a user should hear of.
ENDED_BELOW, KEPT_BELOW = 0.95, 0.9


def warnings(report: dict) -> list[Message]:
    """What the last scored checkpoint did wrong, each with what to change: it does not stop, it
    forgot, or it learned nothing the base did not already answer."""
    entries = report.get("checkpoints", [])
    base = next((e for e in entries if e["checkpoint"] == "base"), None)
    last = entries[-1] if entries and entries[-1]["checkpoint"] != "base" else None
    if last is None:
        return []
    found, name = [], last["checkpoint"]
    ended, kept, learned = last["ended"], last["kept"], last["learned"]
    if ended["share"] is not None and ended["share"] < ENDED_BELOW:
        found.append(msg("learning.warn.ended", checkpoint=name, ended=round(ended["share"] * ended["n"]),
                         n=ended["n"]))
    if kept["share"] is not None and kept["share"] < KEPT_BELOW:
        found.append(msg("learning.warn.kept", checkpoint=name, kept=round(kept["share"] * kept["n"]), n=kept["n"]))
    if base and learned["share"] is not None and learned["share"] <= (base["learned"]["share"] or 0):
        found.append(msg("learning.warn.learned", checkpoint=name, learned=round(learned["share"] * learned["n"]),
                         n=learned["n"], base=round((base["learned"]["share"] or 0) * base["learned"]["n"])))
    return found


def fraction(share: float | None, n: int) -> str:
    if share is None:
        return "-"
    return f"{share:.0%} ({round(share * n)}/{n})"


def report_table(report: dict) -> str:
    lines = [f"Learning report of run {report['run']} (at most {report['max_new_tokens']} new tokens an answer):"]
    lines += [f"  learned: {line}" for line in source_lines(report)]
    lines.append("  kept: general questions the base answers right, still right")
    lines.append(f"{'checkpoint':<18}{'step':>6}{'learned':>16}{'kept':>16}{'ended':>16}{'ROUGE-L':>10}")
    for row in summary_rows(report):
        kept = (fraction(row["kept"], row["kept_n"]) if row["kept"] is not None
                else f"({row['kept_n']} right)" if row["checkpoint"] == "base" else "-")
        rouge = "-" if row["rouge_l"] is None else f"{row['rouge_l']:.3f}"
        lines.append(f"{row['checkpoint']:<18}{row['step']:>6}{fraction(row['learned'], row['learned_n']):>16}"
                     f"{kept:>16}{fraction(row['ended'], row['ended_n']):>16}{rouge:>10}")
    for skipped in report.get("skipped", []):
        lines.append(f"not scored: {skipped['checkpoint']} (step {skipped['step']}): {skipped['reason']}")
    lines += [f"warning: {line}" for line in warnings(report)]
    return "\n".join(lines)
