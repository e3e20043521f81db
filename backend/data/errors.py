"""The one exception the data layer raises for a file it cannot read at all.

Row-level problems are not exceptions: they become `schema` findings, so one
bad row never hides the report on the others. A DataError means the whole file
is unusable, and its text is the sentence shown to the user: which file, where
(line / column / row / field), what is wrong and what to do. Problem and hint
are catalogued messages (backend/messages.py) where the data layer has ids for
them: `str(error)` is English (the CLI), `localized(say)` any language (the UI).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from backend.messages import Message, message_of, msg


class DataError(Exception):
    def __init__(
        self,
        file: str | Path,
        problem: str | Message,
        hint: str | Message = "",
        *,
        line: int | None = None,
        column: int | None = None,
        row: int | None = None,
        field: str | None = None,
    ):
        self.file = str(file)
        self.problem, self.problem_message = str(problem), message_of(problem)
        self.hint, self.hint_message = str(hint), message_of(hint)
        self.line, self.column, self.row, self.field = line, column, row, field
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    @property
    def where(self) -> str:
        parts = []
        if self.line is not None:
            parts.append(f"line {self.line}" + (f", column {self.column}" if self.column is not None else ""))
        if self.row is not None:
            parts.append(f"row {self.row}")
        if self.field:
            parts.append(f"field '{self.field}'")
        return ", ".join(parts)

    @property
    def message(self) -> str:
        return self.localized(lambda m: m if isinstance(m, str) else str(m))

    def localized(self, say: Callable[[Message | str], str]) -> str:
        """The sentence with every catalogued part rendered by `say` (English: str)."""
        parts = []
        if self.line is not None:
            parts.append(msg("data.where.line_column", line=self.line, column=self.column) if self.column is not None
                         else msg("data.where.line", line=self.line))
        if self.row is not None:
            parts.append(msg("data.where.row", row=self.row))
        if self.field:
            parts.append(msg("data.where.field", field=self.field))
        where = say(msg("data.where", parts=", ".join(say(p) for p in parts))) if parts else ""
        problem = say(self.problem_message) if self.problem_message else self.problem
        hint = say(self.hint_message) if self.hint_message else self.hint
        sentence = msg("data.sentence", file=self.file, where=where, problem=problem, hint=hint) if hint \
            else msg("data.sentence_no_hint", file=self.file, where=where, problem=problem)
        return say(sentence)

    def to_dict(self) -> dict:
        return {
            "error": self.message,
            "file": self.file,
            "problem": self.problem,
            "hint": self.hint,
            "line": self.line,
            "column": self.column,
            "row": self.row,
            "field": self.field,
        }
