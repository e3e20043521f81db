"""A data session: one data file read once, then fixed, checked and saved from
the rows in memory. `python -m backend.data fix` and the Data tab both go
through it, so the provenance, the schema-drop step and the check after fixes
are computed in one place.

    session = DataSession(path, mapping)              # parses the file (and hashes it) once
    analysis = session.analyse(plan, tokenizer, ...)  # rows after the fixes, their report, provenance
    analysis.page(2)                                  # from memory: the file is not touched again
    analysis.save(datasets_dir, "name")

Row numbers are always rows of the source file (0-based, as `check` prints them).

`identity` (the placeholders a run fills and their values, identity_values(config))
is what the run will train: the report checks the rows with `{{name}}` /
`{{author}}` filled and `trained()` / `page()` show them so, while the rows kept
and saved keep their placeholders (the run fills them from its own values).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from backend.data.errors import DataError
from backend.data.fixes import FixPlan, apply_fixes
from backend.data.identity_rows import fill_conflicts, fill_row
from backend.data.load import SourceRow, iter_rows, no_usable_rows, open_source
from backend.data.saved_datasets import file_sha256, save_dataset
from backend.data.textrules import placeholders
from backend.messages import Message
from backend.models.chat_templates import TemplateError, apply_for_model
from backend.models.loading import ModelLoadError, load_tokenizer
from backend.runs.model_builds import prepare_model
from backend.runs.workspace import Workspace

PAGE_SIZE = 5


@dataclass
class Analysis:
    label: str  # the file or dataset, as shown
    detected: Message  # one sentence from the loader: type, encoding, shape (the UI translates it)
    shape_columns: dict[str, str]  # canonical field -> the file's column (the mapping in use)
    file_columns: list[str]  # the columns of the file's first row
    report: dict | None  # Report.to_dict(all_rows=True) of the rows after the fixes (None: not checked)
    rows: list[dict]  # canonical rows after the fixes
    indices: list[int]  # the file row of each of `rows`
    rejected: list[SourceRow]  # rows that could not be converted (schema problems)
    steps: list[dict] = field(default_factory=list)  # applied fixes with their counts
    total: int = 0  # rows in the file
    source_meta: dict = field(default_factory=dict)  # provenance for meta.json
    identity: dict[str, str] = field(default_factory=dict)  # placeholder -> the value the run fills it with
    warnings: list[Message] = field(default_factory=list)  # fixes at odds with the run (fill_conflicts)

    def trained(self, row: dict) -> dict:
        """`row` as the run trains it: `{{name}}` / `{{author}}` filled with `identity`."""

        return fill_row(row, self.identity)

    def page(self, page: int, size: int = PAGE_SIZE) -> tuple[list[tuple[int, dict]], int, int]:
        """The rows of 1-based `page` as (file row, row as the run trains it), the page actually shown,
        and the page count."""
        pages = max(1, -(-len(self.rows) // size))
        page = min(max(1, int(page or 1)), pages)
        start = (page - 1) * size
        shown = [(self.indices[i], self.trained(self.rows[i])) for i in range(start, min(start + size, len(self.rows)))]
        return shown, page, pages

    def placeholder_names(self) -> list[str]:
        """Names of the {{placeholders}} left in the rows, in order of first appearance: those the
        run does not fill (`identity`)."""

        names: dict[str, None] = {}
        for row in self.rows:
            filled = self.identity if "messages" in row else {}  # preference rows train as they are
            messages = row.get("messages") or [m for k in ("prompt", "chosen", "rejected", "completion")
                                               for m in row.get(k, [])]
            for message in messages:
                for name in placeholders(message["content"]):
                    if name not in filled:
                        names.setdefault(name, None)
        return list(names)

    def saved_steps(self) -> list[dict]:
        """The fix steps as meta.json records them: rows with schema problems are dropped first."""
        steps = list(self.steps)
        if self.rejected:
            steps.insert(0, {"id": "drop_schema_errors", "params": {}, "changed": 0, "removed": len(self.rejected)})
        return steps

    def save(self, datasets_dir: Path, name: str, eval_ratio: float = 0.0, seed: int = 42,
             overwrite: bool = False) -> Path:
        """Write the fixed rows as workspace dataset `name` with its train / eval split."""

        return save_dataset(datasets_dir, name, self.rows, source=self.source_meta, fixes=self.saved_steps(),
                            rows_before=self.total, eval_ratio=float(eval_ratio), seed=int(seed), overwrite=overwrite)


class DataSession:
    """The rows of one file under one column mapping, read once. Raises DataError when unusable."""

    def __init__(self, path: str | Path, mapping: dict[str, str] | None = None, dataset: str | None = None):
        self.path, self.mapping, self.dataset = str(path), mapping, dataset
        self.source = open_source(path, mapping, dataset)
        self.items = list(iter_rows(self.source))  # every row of the file, usable or not, in file order
        self.rows = [item.row for item in self.items if item.row is not None]
        self.indices = [item.index for item in self.items if item.row is not None]
        self.rejected = [item for item in self.items if item.row is None]
        if not self.rows:
            raise no_usable_rows(self.source, self.rejected[0], len(self.rejected))
        self.flags = {item.index: item.flags for item in self.items if item.flags}
        first = self.items[0].raw
        self.file_columns = [str(k) for k in first] if isinstance(first, dict) else []
        for item in self.items:  # the raw records of usable rows are not shown again: do not hold them twice
            if item.row is not None:
                item.raw = None
        source = self.source
        self.provenance = {"path": str(Path(source.path).resolve()), "sha256": file_sha256(source.path),
                           "format": source.shape.name, "file_type": source.file_type,
                           "encoding": source.encoding, "rows": len(self.items)}

    @property
    def total(self) -> int:
        return len(self.items)

    def analyse(self, plan: FixPlan | None = None, tokenizer=None, model: str | None = None, cutoff: int = 1024,
                check: bool = True, overflow: str = "truncate", identity: dict[str, str] | None = None) -> Analysis:
        """The rows after `plan`, their check report (unless `check` is False) and the provenance;
        `overflow` (RunConfig's) is what the checks say training does with rows over `cutoff`;
        `identity` what the run fills `{{name}}` / `{{author}}` with (identity_values(config))."""
        plan, identity = plan or FixPlan(), dict(identity or {})
        fixed = apply_fixes(self.rows, self.indices, plan, tokenizer, cutoff)
        steps = [s.to_dict() for s in fixed.steps]
        report = self._report(fixed.rows, fixed.indices, bool(steps), tokenizer, model, cutoff, overflow,
                              identity) if check else None
        source = self.source
        return Analysis(
            label=source.label, detected=source.describe_message(), shape_columns=dict(source.shape.columns),
            file_columns=list(self.file_columns), report=report, rows=fixed.rows, indices=fixed.indices,
            rejected=self.rejected, steps=steps, total=self.total, source_meta=dict(self.provenance),
            identity=identity, warnings=self._fill_warnings(plan.fill, identity),
        )

    def _fill_warnings(self, fill: dict[str, str], identity: dict[str, str]) -> list[Message]:
        """A fill of `{{name}}` / `{{author}}` at odds with the run's value, for placeholders the rows
        hold (a value for one they lack changes nothing)."""

        conflicts = fill_conflicts(fill, identity)
        if not conflicts:
            return []
        held = {name for row in self.rows if isinstance(row.get("messages"), list) for m in row["messages"]
                for name in placeholders(m["content"])}
        return [warning for warning in conflicts if warning.args["placeholder"].strip("{}") in held]

    def _report(self, rows: list[dict], indices: list[int], fixed: bool, tokenizer, model, cutoff, overflow,
                identity) -> dict:
        """The same checks `python -m backend.data check` runs, over the rows in memory. Without fixes
        they see every row of the file (the schema check lists the rejected ones); after fixes, the
        fixed rows only (rejected rows are already left out), still numbered as rows of the file."""
        from backend.data.checks.run import check_source

        if not fixed:
            report = check_source(self.source, self.items, tokenizer=tokenizer, model=model, cutoff_len=cutoff,
                                  overflow=overflow, identity=identity)
            return report.to_dict(all_rows=True)
        items = (SourceRow(index, None, row, [], self.flags.get(index, set())) for index, row in zip(indices, rows))
        report = check_source(self.source, items, tokenizer=tokenizer, model=model, cutoff_len=cutoff,
                              require_usable=False, overflow=overflow, identity=identity)
        out = report.to_dict(all_rows=True)
        out["rows"], out["schema_rejected"] = self.total, len(self.rejected)
        return out


def load_model_tokenizer(model: str | None, workspace: Path, chat_template: str = "auto"):
    """The tokenizer of 'demo' or a local model folder (None without a model), with the chat
    template a run with `chat_template` trains through (a base model gets one: the counts are the
    worker's)."""
    return model_tokenizer_and_template(model, workspace, chat_template)[0]


def model_tokenizer_and_template(model: str | None, workspace: Path, chat_template: str = "auto"):
    """(tokenizer, TemplatePlan), or (None, None) without a model."""
    if not model:
        return None, None

    try:
        # A first use builds the demo model (minutes) or converts a GGUF model: logged as it goes.
        path = prepare_model(model, Workspace(workspace).models_dir, None)
        tokenizer = load_tokenizer(path)
    except ModelLoadError as e:
        raise DataError("--model", str(e).rstrip(".")) from None
    try:
        plan = apply_for_model(tokenizer, chat_template, path)
    except TemplateError as e:
        raise DataError(model, e.catalogued or str(e)) from None
    return tokenizer, plan
