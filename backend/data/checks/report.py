"""What a check run returns: plain dataclasses the CLI prints and the UI renders.

`Report.to_dict()` is the `--json` object of `python -m backend.data check`;
`Report.check(id).rows` lists every flagged row (0-based row numbers in the
file), `Report.row_flags()` the check ids per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.data.load import problem_text
from backend.messages import Message, msg

SEVERITIES = ("error", "warning", "info")
EXAMPLES = 10


@dataclass(frozen=True)
class CheckSpec:
    id: str
    severity: str  # error | warning | info
    title: str
    hint: str  # what to do about it (names the fix)
    text_id: str = ""  # the UI's text for the title (data.check.<text_id>) when it is not the id's usual one

    @property
    def text_key(self) -> str:
        return self.text_id or self.id


@dataclass
class CheckResult:
    spec: CheckSpec
    rows: list[int] = field(default_factory=list)  # every flagged row, ascending
    details: dict[int, str | Message] = field(default_factory=dict)  # a short reason for the first rows

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def severity(self) -> str:
        return self.spec.severity

    @property
    def count(self) -> int:
        return len(self.rows)

    def to_dict(self, all_rows: bool = False) -> dict:
        out = {
            "id": self.id,
            "severity": self.severity,
            "title": self.spec.title,
            "count": self.count,
            "examples": self.rows[:EXAMPLES],
            "hint": self.spec.hint,
            "text_id": self.spec.text_key,
            "details": {str(r): str(self.details[r]) for r in self.rows[:EXAMPLES] if r in self.details},
        }
        if all_rows:
            out["rows"] = list(self.rows)
            # Every kept reason as its message id, for a reader in another language (the Data tab's drill-down).
            out["detail_messages"] = {str(r): _note(d) for r, d in self.details.items()}
        return out


@dataclass
class TokenStats:
    count: int
    mean: float
    p50: int
    p90: int
    p99: int
    max: int
    cutoff_len: int
    over_cutoff: int
    histogram: dict  # {"edges": [..], "counts": [..]} in tokens; `cutoff_len` marks the line

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Report:
    file: str
    format: str  # the detected shape: alpaca | sharegpt | openai
    file_type: str  # json | jsonl | csv | tsv | parquet
    encoding: str | None
    detected: str  # one sentence on what was detected
    rows: int  # rows in the file
    usable_rows: int  # rows that converted to canonical rows
    checks: list[CheckResult]
    token_lengths: TokenStats | None = None
    model: str | None = None
    language: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    preference: dict | None = None  # preference data: length bias (characters) and KTO label balance

    def check(self, check_id: str) -> CheckResult:
        for result in self.checks:
            if result.id == check_id:
                return result
        raise KeyError(check_id)

    @property
    def has_errors(self) -> bool:
        return any(c.severity == "error" and c.count for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 1 if self.has_errors else 0

    def row_flags(self) -> dict[int, list[str]]:
        flags: dict[int, list[str]] = {}
        for result in self.checks:
            for row in result.rows:
                flags.setdefault(row, []).append(result.id)
        return flags

    def summary(self) -> dict[str, int]:
        """Flagged-row counts per severity (a row counts once per check)."""
        return {s: sum(c.count for c in self.checks if c.severity == s) for s in SEVERITIES}

    def to_dict(self, all_rows: bool = False) -> dict:
        return {
            "file": self.file,
            "format": self.format,
            "file_type": self.file_type,
            "encoding": self.encoding,
            "detected": self.detected,
            "rows": self.rows,
            "usable_rows": self.usable_rows,
            "model": self.model,
            "token_lengths": self.token_lengths.to_dict() if self.token_lengths else None,
            "language": self.language,
            "summary": self.summary(),
            "checks": [c.to_dict(all_rows) for c in self.checks],
            "notes": self.notes,
            **({"preference": self.preference} if self.preference is not None else {}),
        }

    def to_text(self) -> str:
        lines = [f"{self.file}: {self.detected}", f"rows: {self.rows} in the file, {self.usable_rows} usable"]
        t = self.token_lengths
        if t:
            lines.append(
                f"tokens ({self.model}, cutoff {t.cutoff_len}): mean {t.mean:.0f}, p50 {t.p50}, "
                f"p90 {t.p90}, p99 {t.p99}, max {t.max}; {t.over_cutoff} over the cutoff"
            )
        if self.language:
            lines.append("scripts: " + ", ".join(f"{k} {v}" for k, v in self.language.items()))
        lines.extend(f"note: {n}" for n in self.notes)
        lines.append("")
        for c in sorted(self.checks, key=lambda c: SEVERITIES.index(c.severity)):
            mark = "ok" if not c.count else c.severity.upper()
            examples = ", ".join(map(str, c.rows[:5])) + (" ..." if c.count > 5 else "")
            lines.append(f"{mark:8} {c.id:20} {c.count:7}  {c.spec.title}")
            if c.count:
                first = c.rows[0]
                reason = f" (row {first}: {c.details[first]})" if first in c.details else ""
                lines.append(f"{'':8} rows {examples}{reason}")
                lines.append(f"{'':8} -> {c.spec.hint}")
        return "\n".join(lines)


MAX_DETAILS = 1000  # per check: the Data tab pages through flagged rows, details beyond this are not kept


def _note(detail: str | Message) -> dict | str:
    return detail.to_dict() if isinstance(detail, Message) else detail


def flag_row(result: CheckResult, row: int, detail: str | Message | None = None) -> None:
    """Record `row` as flagged by `result`'s check, with its detail while there is room."""
    result.rows.append(row)
    if detail and len(result.details) < MAX_DETAILS:
        result.details[row] = detail


def rejected_detail(problems: list) -> str | Message:
    """The schema check's detail of a rejected row: its first problem, and how many more."""

    where, message = problems[0]
    first = problem_text(where, message)
    return msg("data.note.more_problems", problem=first, count=len(problems) - 1) if len(problems) > 1 else first
