"""Checks for preference data (pairs and KTO rows), in the same Report as the
instruction checks: chosen equal to rejected, an empty answer, the same prompt
with contradicting preferences (A over B in one row, B over A in another),
pairs whose prompt alone fills the cutoff (training leaves them out), pairs
over the cutoff (prompt + the longer answer: cut in training), and the length bias: the
share of pairs whose chosen answer is longer (DPO can learn verbosity instead
of quality when that share is far from one half).
"""

from __future__ import annotations

from array import array

import numpy as np

from backend.data.checks.report import CheckResult, flag_row, rejected_detail
from backend.data.checks.specs import PAIR_SPECS
from backend.data.load import SourceRow
from backend.data.pair_rows import measure
from backend.data.textrules import answers_of, row_key, text_of
from backend.messages import Message, msg

PAIR_TOKEN_CHECKS = ("prompt_fills_cutoff", "over_cutoff")


class PairChecker:
    """Same interface as checks.run.Checker (observe, finish, the fields _report reads)."""

    def __init__(self, tokenizer=None, cutoff_len: int = 1024):
        self.tokenizer, self.cutoff_len = tokenizer, cutoff_len
        self.results = {s.id: CheckResult(s) for s in PAIR_SPECS if tokenizer is not None or s.id not in PAIR_TOKEN_CHECKS}
        self.rows_seen = 0
        self.first_rejected: SourceRow | None = None
        self.usable = array("q")
        self.token_lengths = array("q")
        self.chosen_chars, self.rejected_chars = array("q"), array("q")
        self.labels = [0, 0]  # KTO: rows labelled false, true
        self.preferences: dict[bytes, tuple[int, bytes, bytes]] = {}  # prompt key -> (row, chosen key, rejected key)
        self.batch: list[tuple[int, dict]] = []

    def flag(self, check_id: str, row: int, detail: str | Message | None = None) -> None:
        flag_row(self.results[check_id], row, detail)

    def observe(self, item: SourceRow) -> None:
        self.rows_seen += 1
        if item.row is None:
            self.first_rejected = self.first_rejected or item
            self.flag("schema", item.index, rejected_detail(item.problems))
            return
        index, row = item.index, item.row
        self.usable.append(index)
        names = ("chosen", "rejected") if "chosen" in row else ("completion",)
        texts = [text_of(a) for a in answers_of(row)]
        empty = [n for n, t in zip(names, texts) if not t.strip()]
        if empty:
            self.flag("empty_answer", index, msg("data.note.answers_empty", answers=" and ".join(empty)))
        if "chosen" in row:
            self._pair(index, row, texts)
        else:
            self.labels[bool(row["label"])] += 1
        if self.tokenizer is not None:
            self.batch.append((index, row))
            if len(self.batch) >= 500:
                self._count_batch()

    def _pair(self, index: int, row: dict, texts: list[str]) -> None:
        chosen, rejected = texts
        self.chosen_chars.append(len(chosen))
        self.rejected_chars.append(len(rejected))
        if chosen.strip() and chosen == rejected:
            self.flag("same_answer", index)
        if len(chosen) > len(rejected):
            self.flag("length_bias", index)
        prompt = row_key(row["prompt"])
        c, r = row_key(row["chosen"]), row_key(row["rejected"])
        seen = self.preferences.setdefault(prompt, (index, c, r))
        if seen[0] != index and (seen[1], seen[2]) == (r, c):
            self.flag("contradicting_pair", seen[0], msg("data.note.prefers_other", row=index))
            self.flag("contradicting_pair", index, msg("data.note.prefers_other", row=seen[0]))

    def _count_batch(self) -> None:
        # Training's own rule (backend/data/pair_rows.py): a prompt that fills the cutoff leaves the
        # pair out; a longer pair is trained with its answers cut.
        for (index, _), tokens in zip(self.batch, measure(self.tokenizer, [row for _, row in self.batch])):
            self.token_lengths.append(tokens.longest)
            if tokens.prompt >= self.cutoff_len:
                self.flag("prompt_fills_cutoff", index, f"the prompt alone is {tokens.prompt} tokens (cutoff "
                                                        f"{self.cutoff_len}); cutoff_len {tokens.longest} keeps it whole")
            elif tokens.longest > self.cutoff_len:
                self.flag("over_cutoff", index, f"{tokens.longest} tokens > cutoff {self.cutoff_len}")
        self.batch = []

    def finish(self) -> dict:
        if self.batch:
            self._count_batch()
        for result in self.results.values():
            result.rows = sorted(set(result.rows))
        return {}

    def summary(self) -> dict:
        """The length-bias numbers (characters) and, for KTO rows, the label balance."""
        out: dict = {}
        pairs = len(self.chosen_chars)
        if pairs:
            longer = self.results["length_bias"].count
            out["pairs"] = pairs
            out["chosen_longer_share"] = round(longer / pairs, 4)
            out["chosen_chars"] = _distribution(self.chosen_chars)
            out["rejected_chars"] = _distribution(self.rejected_chars)
        if any(self.labels):
            out["kto_labels"] = {"desirable": self.labels[1], "undesirable": self.labels[0]}
        return out


def _distribution(values) -> dict:
    a = np.asarray(values, dtype=np.int64)
    p50, p90 = (int(np.percentile(a, q)) for q in (50, 90))
    return {"mean": round(float(a.mean()), 1), "p50": p50, "p90": p90, "max": int(a.max())}


def bias_line(summary: dict) -> str | None:
    if "pairs" not in summary:
        return None
    c, r = summary["chosen_chars"], summary["rejected_chars"]
    return (f"length bias: the chosen answer is longer in {100 * summary['chosen_longer_share']:.0f}% of "
            f"{summary['pairs']} pairs; chosen characters p50 {c['p50']}, p90 {c['p90']}, mean {c['mean']}; "
            f"rejected p50 {r['p50']}, p90 {r['p90']}, mean {r['mean']}")
