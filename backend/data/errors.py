"""The one exception the data layer raises for a file it cannot read at all.

Row-level problems are not exceptions: they become `schema` findings, so one
bad row never hides the report on the others. A DataError means the whole file
is unusable, and its text is the sentence shown to the user: which file, where
(line / column / row / field), what is wrong and what to do.
"""

from __future__ import annotations

from pathlib import Path


class DataError(Exception):
    def __init__(
        self,
        file: str | Path,
        problem: str,
        hint: str = "",
        *,
        line: int | None = None,
        column: int | None = None,
        row: int | None = None,
        field: str | None = None,
    ):
        self.file = str(file)
        self.problem = problem
        self.hint = hint
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
        where = f" ({self.where})" if self.where else ""
        text = f"{self.file}{where}: {self.problem}"
        return f"{text}. {self.hint}" if self.hint else text + "."

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
