"""Run every check in one streaming pass over the rows.

Memory: rows are looked at once and forgotten. What is kept per row is small
and fixed: 8-byte digests for the duplicate / near-duplicate / prompt keys,
the character and token lengths, a script code. Token lengths are counted in
batches with `count_tokens`, the same template path the trainer uses; only
rows over the cutoff are fully encoded, to see whether the cut removes the
whole response.

The rows are checked as the run trains them: `{{name}}` / `{{author}}` that the
run fills from identity_name / identity_author (`identity`, e.g.
identity_values(config)) are filled first, the same way the worker fills them
(backend/data/identity_rows.py). They are listed by the `identity_fill` info
check, not as unfilled placeholders; any other `{{...}}` is.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from pathlib import Path

from jinja2.exceptions import TemplateError

from backend.data.checks.report import CheckResult, Report, flag_row, rejected_detail
from backend.data.checks.specs import MIN_RESPONSE_CHARS, OUTLIER_IQR, TOKEN_CHECKS, specs_for
from backend.data.checks.stats import token_stats, upper_fence
from backend.data.encode import count_tokens, first_prompt
from backend.data.identity_rows import fill_row, identity_note
from backend.data.load import Source, SourceRow, iter_rows, no_usable_rows, open_source
from backend.data.pairwise import is_preference, is_preference_row
from backend.data.text_encoding import describe_encoding
from backend.data.textrules import (
    CJK_WEIGHT,
    control_found,
    html_found,
    placeholders,
    prompt_and_response,
    row_key,
    script_counts,
    script_of,
)
from backend.messages import Message, msg

# What a chat template raises for a conversation it cannot render (jinja's
# TemplateError is an Exception subclass; templates call raise_exception()).
TEMPLATE_ERRORS = (TemplateError, ValueError, TypeError, KeyError)
DIGEST_MASK = (1 << 64) - 1  # reasons kept per check; the row list itself is complete
SCRIPTS = ("none", "cjk", "latin")


class Checker:
    def __init__(self, tokenizer=None, cutoff_len: int = 1024, batch_size: int = 1000, overflow: str = "truncate",
                 identity: dict[str, str] | None = None):
        self.tokenizer, self.cutoff_len, self.batch_size = tokenizer, cutoff_len, batch_size
        self.identity = dict(identity or {})  # placeholder -> the value the run fills it with
        self.results = {s.id: CheckResult(s) for s in specs_for(overflow)
                        if tokenizer is not None or s.id not in TOKEN_CHECKS}
        self.exact: dict[bytes, int] = {}
        self.near: dict[bytes, int] = {}
        self.prompts: dict[bytes, int] = {}  # prompt key -> first row << 64 | its response digest
        self.groups: dict[bytes, list] = {}  # repeated prompt key -> [conflict, first row, later rows...]
        self.rows_seen = 0
        self.first_rejected: SourceRow | None = None
        self.usable = array("q")  # row numbers of usable rows, in order
        self.chars = array("q")  # their character lengths
        self.scripts = array("b")  # their script: index into SCRIPTS (row, prompt, response packed)
        self.token_lengths = array("q")
        self.batch: list[tuple[int, dict]] = []
        self.letters = [0, 0]  # CJK characters, Latin letters in user and assistant turns

    def flag(self, check_id: str, row: int, detail: str | Message | None = None) -> None:
        flag_row(self.results[check_id], row, detail)

    def observe(self, item: SourceRow) -> None:
        self.rows_seen += 1
        if item.row is None:
            self.first_rejected = self.first_rejected or item
            self.flag("schema", item.index, rejected_detail(item.problems))
            return
        index, row = item.index, item.row
        if self.identity:
            row = self._fill_identity(index, row)
        messages = row["messages"]
        if "empty_input" in item.flags:
            self.flag("empty_input", index)
        self._text_checks(index, messages)
        self._duplicates(index, messages)
        self.usable.append(index)
        self.chars.append(sum(len(m["content"]) for m in messages))
        if self.tokenizer is not None:
            self.batch.append((index, row))
            if len(self.batch) >= self.batch_size:
                self._count_batch()

    def _fill_identity(self, index: int, row: dict) -> dict:
        """The row as the run trains it; a row where the run fills something is flagged `identity_fill`."""
        for turn, m in enumerate(row["messages"]):
            names = [n for n in dict.fromkeys(placeholders(m["content"])) if n in self.identity]
            if names:
                who = msg("data.note.turn", role=m["role"], turn=turn)
                found = ", ".join(f"{{{{{n}}}}} = {self.identity[n]!r}" for n in names)
                self.flag("identity_fill", index, msg("data.note.train_fills", who=who, found=found))
                return fill_row(row, self.identity)
        return row

    def _text_checks(self, index: int, messages: list[dict]) -> None:
        found: dict[str, Message] = {}
        for turn, m in enumerate(messages):
            text, who = m["content"], msg("data.note.turn", role=m["role"], turn=turn)
            if not text.strip():
                found.setdefault("empty_field", msg("data.note.empty", who=who))
                continue
            if "html" not in found and (tag := html_found(text)):
                found["html"] = msg("data.note.found", who=who, found=tag)
            if "control_chars" not in found and (char := control_found(text)):
                found["control_chars"] = msg("data.note.found", who=who, found=char)
            if "placeholder" not in found and (names := placeholders(text)):
                found["placeholder"] = msg("data.note.found", who=who,
                                           found=", ".join("{{" + n + "}}" for n in dict.fromkeys(names)))
        for check_id, detail in found.items():
            self.flag(check_id, index, detail)
        prompt, response = prompt_and_response(messages)
        if 0 < len(response.strip()) < MIN_RESPONSE_CHARS:
            self.flag("short_response", index, msg("data.note.short_response", text=response.strip()))
        p_counts = [0, 0]
        for m in prompt:
            if m["role"] == "user":
                c = script_counts(m["content"])
                p_counts[0] += c[0]
                p_counts[1] += c[1]
        r_counts = script_counts(response)
        row_counts = (p_counts[0] + r_counts[0], p_counts[1] + r_counts[1])
        self.letters[0] += row_counts[0] // CJK_WEIGHT
        self.letters[1] += row_counts[1]
        codes = [SCRIPTS.index(script_of(c)) for c in (row_counts, tuple(p_counts), r_counts)]
        self.scripts.extend(codes)

    def _duplicates(self, index: int, messages: list[dict]) -> None:
        key = row_key(messages)
        first = self.exact.setdefault(key, index)
        if first != index:
            self.flag("duplicate", index, msg("data.note.same_as_row", row=first))
        else:
            near = self.near.setdefault(row_key(messages, folded=True), index)
            if near != index:
                self.flag("near_duplicate", index, msg("data.note.like_row", row=near))
        prompt, response = prompt_and_response(messages)
        if not any(m["role"] == "user" for m in prompt):
            return
        p_key = row_key(prompt)
        r_key = int.from_bytes(row_key([{"role": "assistant", "content": response}]), "little")
        first = self.prompts.get(p_key)
        if first is None:
            # One int per prompt (first row << 64 | response digest): the biggest per-row cost.
            self.prompts[p_key] = (index << 64) | r_key
            return
        group = self.groups.setdefault(p_key, [False, first >> 64])
        group.append(index)
        group[0] = group[0] or r_key != first & DIGEST_MASK

    def _count_batch(self) -> None:
        lengths = self._lengths([row for _, row in self.batch])
        over = []
        for (index, row), length in zip(self.batch, lengths):
            if length is None:
                continue
            self.token_lengths.append(length)
            if length > self.cutoff_len:
                self.flag("over_cutoff", index, msg("data.note.over_cutoff", tokens=length, cutoff=self.cutoff_len))
                over.append((index, row))
        # The cut removes the whole response when everything before the first
        # assistant turn (with its header) already fills the cutoff.
        over = [(index, first_prompt(row["messages"])) for index, row in over]
        over = [(index, prompt) for index, prompt in over if prompt]
        prompts = [{"messages": prompt, "add_generation_prompt": True} for _, prompt in over]
        for (index, _), length in zip(over, count_tokens(self.tokenizer, prompts)):
            if length >= self.cutoff_len:
                self.flag("response_cut", index, msg("data.note.prompt_tokens", tokens=length))
        self.batch = []

    def _lengths(self, rows: list[dict]) -> list[int | None]:
        """Token lengths; a row the chat template refuses gets None and a schema finding."""
        try:
            return count_tokens(self.tokenizer, rows, batch_size=len(rows))
        except TEMPLATE_ERRORS:
            pass  # find the row(s) at fault, one by one
        lengths: list[int | None] = []
        for (index, _), row in zip(self.batch, rows):
            try:
                lengths.append(count_tokens(self.tokenizer, [row])[0])
            except TEMPLATE_ERRORS as e:
                lengths.append(None)
                self.flag("schema", index, msg("data.note.template_refuses", error=str(e)))
        return lengths

    def finish(self) -> dict:
        """Set-level checks; returns the language summary."""
        if self.batch:
            self._count_batch()
        for conflict, *group in self.groups.values():
            if conflict:
                for row in group:
                    self.flag("conflicting_answers", row, conflict_detail(row, group))
        fence = upper_fence(self.chars, OUTLIER_IQR)
        for index, chars in zip(self.usable, self.chars):
            if fence is not None and chars > fence:
                self.flag("length_outlier", index, msg("data.note.outlier", chars=chars, fence=round(fence)))
        language = self._language()
        for result in self.results.values():
            result.rows.sort()
        return language

    def _language(self) -> dict:
        codes = self.scripts
        row_scripts = codes[0::3]
        counts = {name: row_scripts.count(i) for i, name in enumerate(SCRIPTS)}
        major = 1 if counts["cjk"] >= counts["latin"] else 2
        for k, index in enumerate(self.usable):
            row, prompt, response = codes[3 * k : 3 * k + 3]
            if prompt and response and prompt != response:
                self.flag("language_mix", index, msg("data.note.scripts_differ", prompt=SCRIPTS[prompt],
                                                     response=SCRIPTS[response]))
            elif row and row != major:
                self.flag("language_mix", index, msg("data.note.script_unlike", script=SCRIPTS[row], major=SCRIPTS[major]))
        cjk, latin = self.letters
        return {
            "cjk_rows": counts["cjk"],
            "latin_rows": counts["latin"],
            "no_letters_rows": counts["none"],
            "cjk_char_share": round(cjk / (cjk + latin), 4) if cjk + latin else 0.0,
        }


def conflict_detail(row: int, group: list[int], shown: int = 3) -> Message:
    """A conflicting row's note: the other rows of its prompt group (never the row itself)."""
    others = [other for other in group if other != row]
    named = ", ".join(str(other) for other in others[:shown])
    if len(others) == 1:
        return msg("data.note.conflict_one", row=named)
    more = msg("data.note.and_more", count=len(others) - shown) if len(others) > shown else ""
    return msg("data.note.conflict_many", rows=named, more=more)


def check_file(
    path: str | Path,
    *,
    tokenizer=None,
    model: str | None = None,
    cutoff_len: int = 1024,
    mapping: dict[str, str] | None = None,
    dataset: str | None = None,
    progress: Callable[[int], None] | None = None,
    overflow: str = "truncate",
    identity: dict[str, str] | None = None,
) -> Report:
    """Stream the file once through every check. Raises DataError when it cannot be read.
    `overflow`: RunConfig.overflow, what training does with rows over `cutoff_len` (cut or drop);
    `identity`: the placeholders the run fills and their values (identity_values(config)); None: none."""
    source = open_source(path, mapping, dataset)
    return check_source(source, iter_rows(source), tokenizer=tokenizer, model=model, cutoff_len=cutoff_len,
                        progress=progress, overflow=overflow, identity=identity)


def check_source(source: Source, items: Iterable[SourceRow], *, tokenizer=None, model: str | None = None,
                 cutoff_len: int = 1024, progress: Callable[[int], None] | None = None,
                 require_usable: bool = True, overflow: str = "truncate",
                 identity: dict[str, str] | None = None) -> Report:
    """Every check over `items` of `source`: streamed from the file by `check_file`, or rows
    already read (and fixed) by a data session (backend/data/prepare.py)."""
    checker = _checker_for(source.shape.name, tokenizer, cutoff_len, overflow, identity)
    _feed(checker, items, progress)
    if require_usable and not checker.usable:
        raise no_usable_rows(source, checker.first_rejected, checker.rows_seen)
    report = _report(checker, source.label, source.shape.name, source.file_type, source.encoding, model)
    report.detected = source.describe()
    if source.encoding not in (None, "utf-8"):
        report.notes.append(f"decoded as {describe_encoding(source.encoding)}")
    if source.num_samples is not None:  # the rows are checked all the same: a run may draw any of them
        usable = report.usable_rows
        report.notes.append(str(msg("data.note.num_samples_fewer", count=source.num_samples, rows=usable)
                                if source.num_samples <= usable else
                                msg("data.note.num_samples_more", count=source.num_samples, rows=usable,
                                    extra=source.num_samples - usable)))
    return report


def check_rows(rows: list[dict], *, tokenizer=None, model: str | None = None, cutoff_len: int = 1024,
               label: str = "(rows)", overflow: str = "truncate", identity: dict[str, str] | None = None) -> Report:
    """The same checks on canonical rows already in memory (e.g. after fixes)."""

    checker = _checker_for("pairwise" if rows and is_preference_row(rows[0]) else "canonical", tokenizer, cutoff_len,
                           overflow, identity)
    _feed(checker, (SourceRow(i, None, row) for i, row in enumerate(rows)), None)
    report = _report(checker, label, "canonical", "rows", None, model)
    report.detected = f"{len(rows)} canonical rows"
    return report


def _checker_for(shape: str, tokenizer, cutoff_len: int, overflow: str = "truncate", identity=None):
    """Preference pairs have their own rule for long rows (backend/data/pair_rows.py): overflow is the SFT
    worker's, and so is the identity fill (the preference stages train the pairs as they are)."""
    from backend.data.checks.pairs import PairChecker

    if is_preference(shape):
        return PairChecker(tokenizer, cutoff_len)
    return Checker(tokenizer, cutoff_len, overflow=overflow, identity=identity)


def _feed(checker: Checker, items: Iterable[SourceRow], progress) -> None:
    for item in items:
        checker.observe(item)
        if progress and checker.rows_seen % 10000 == 0:
            progress(checker.rows_seen)


def _report(checker: Checker, label, shape, kind, encoding, model) -> Report:
    language = checker.finish()
    report = Report(
        file=str(label),
        format=shape,
        file_type=kind,
        encoding=encoding,
        detected="",
        rows=checker.rows_seen,
        usable_rows=len(checker.usable),
        checks=list(checker.results.values()),
        model=model,
        language=language,
    )
    filled = checker.results.get("identity_fill")
    if filled is not None and filled.count:
        report.notes.append(str(identity_note(checker.identity, filled.count)))
    if hasattr(checker, "summary"):  # preference rows: the length-bias numbers
        from backend.data.checks.pairs import bias_line

        report.preference = checker.summary()
        line = bias_line(report.preference)
        if line:
            report.notes.append(line)
    if checker.tokenizer is not None:
        report.token_lengths = token_stats(checker.token_lengths, checker.cutoff_len)
    else:
        report.notes.append("token lengths not counted: pass a model (--model PATH or --model demo)")
    return report
