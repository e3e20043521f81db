"""What the Data tab works on, without gradio: one source file (or workspace
dataset), the user's column mapping and chosen fixes, the token-counting
model and cutoff. Every event recomputes the analysis from these few values,
so the browser session holds no rows and the user's file is only ever read.

Row numbers shown to the user are always rows of the source file (0-based,
like `python -m backend.data check`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from backend.data.errors import DataError
from backend.runs.workspace import Workspace

PAGE_SIZE = 5
FIX_FIELDS = ("remove_control_chars", "strip_html", "normalize", "fill", "drop_empty", "drop_duplicates",
              "drop_near_duplicates", "conflicts", "over_cutoff", "drop_identical_pairs")


@dataclass
class Analysis:
    label: str  # the file or dataset, as shown
    detected: str  # one sentence from the loader: type, encoding, shape
    shape_columns: dict[str, str]  # canonical field -> the file's column (the mapping in use)
    file_columns: list[str]  # the columns of the file's first row
    report: dict  # backend Report.to_dict(all_rows=True), of the rows after the fixes
    rows: list[dict]  # canonical rows after the fixes
    indices: list[int]  # the file row of each of `rows`
    rejected: list  # SourceRow items that could not be converted (schema problems)
    steps: list[dict] = field(default_factory=list)  # applied fixes with their counts
    total: int = 0  # rows in the file
    source_meta: dict = field(default_factory=dict)  # provenance for meta.json

    @property
    def fixed(self) -> bool:
        return bool(self.steps)


def dataset_source(workspace: Workspace, name: str) -> Path:
    """The folder of a workspace dataset, refusing names that leave datasets/."""
    from backend.data.saved_datasets import validate_name

    return workspace.datasets_dir / validate_name(name)


def load_tokenizer(workspace: Workspace, model: str | None):
    """The tokenizer that counts tokens ('demo' or a local folder), or None for no token counts."""
    from backend.data.cli import load_model_tokenizer
    from ui.warmup import import_heavy_libraries

    import_heavy_libraries()
    return load_model_tokenizer(model or None, workspace.root)


def analyse(workspace: Workspace, path: str, mapping: dict | None, plan: dict, model: str | None,
            cutoff: int) -> Analysis:
    """Load, fix and check. Raises DataError / ValueError with a sentence for the user."""
    from backend.data.checks import check_file
    from backend.data.checks.run import check_rows
    from backend.data.fixes import FixPlan, apply_fixes
    from backend.data.load import load_rows
    from backend.data.saved_datasets import file_sha256

    tokenizer = load_tokenizer(workspace, model)
    loaded = load_rows(path, mapping)
    fix_plan = FixPlan(**{k: v for k, v in (plan or {}).items() if k in FIX_FIELDS})
    fixed = apply_fixes(loaded.rows, loaded.indices, fix_plan, tokenizer, cutoff)
    steps = [s.to_dict() for s in fixed.steps]
    if steps:
        report = check_rows(fixed.rows, tokenizer=tokenizer, model=model, cutoff_len=cutoff, label=loaded.source.label)
        # check_rows numbers rows by position; show them as rows of the file.
        report_dict = _renumber(report.to_dict(all_rows=True), fixed.indices)
        report_dict["rows"], report_dict["schema_rejected"] = loaded.total, len(loaded.rejected)
    else:
        report_dict = check_file(path, tokenizer=tokenizer, model=model, cutoff_len=cutoff,
                                 mapping=mapping).to_dict(all_rows=True)
    first_raw = loaded.rejected[0].raw if loaded.rejected and not loaded.indices else None
    source = loaded.source
    return Analysis(
        label=source.label, detected=source.describe(), shape_columns=dict(source.shape.columns),
        file_columns=_columns(path, mapping, first_raw), report=report_dict, rows=fixed.rows,
        indices=fixed.indices, rejected=loaded.rejected, steps=steps, total=loaded.total,
        source_meta={"path": str(Path(source.path).resolve()), "sha256": file_sha256(source.path),
                     "format": source.shape.name, "file_type": source.file_type,
                     "encoding": source.encoding, "rows": loaded.total},
    )


def _renumber(report: dict, indices: list[int]) -> dict:
    for check in report["checks"]:
        check["rows"] = [indices[r] for r in check.get("rows", [])]
        check["examples"] = [indices[r] for r in check["examples"]]
        check["details"] = {str(indices[int(r)]): d for r, d in check.get("details", {}).items()}
    return report


def _columns(path: str, mapping: dict | None, raw) -> list[str]:
    from backend.data.load import read_rows

    if raw is None:
        try:
            first = read_rows(path, [0], mapping).get(0)
        except DataError:
            return []
        raw = first.raw if first else None
    return [str(k) for k in raw] if isinstance(raw, dict) else []


def check_rows_view(analysis: Analysis, check_id: str, limit: int = 20,
                    lang: str = "en") -> list[tuple[int, list | None, list[str]]]:
    """(file row, messages or None, reasons in `lang`) for the first `limit` rows a check flags."""
    from ui.i18n import localize

    check = next((c for c in analysis.report["checks"] if c["id"] == check_id), None)
    if check is None:
        return []
    by_row = dict(zip(analysis.indices, analysis.rows))
    rejected = {item.index: item for item in analysis.rejected}
    items = []
    for row in check.get("rows", [])[:limit]:
        notes = [check["details"][str(row)]] if str(row) in check.get("details", {}) else []
        if row in rejected:  # every problem of the row, translated (the detail is the first one, in English)
            notes = [f"{where}: {localize(message, lang)}" for where, message in rejected[row].problems]
        items.append((row, _shown(by_row.get(row)), notes))
    return items


def page_view(analysis: Analysis, page: int, size: int = PAGE_SIZE) -> tuple[list[tuple[int, list]], int, int]:
    """The rows of 1-based `page` as (file row, messages), the page actually shown, and the page count."""
    pages = max(1, -(-len(analysis.rows) // size))
    page = min(max(1, int(page or 1)), pages)
    start = (page - 1) * size
    return [(analysis.indices[i], _shown(analysis.rows[i])) for i in range(start, min(start + size, len(analysis.rows)))], page, pages


def _shown(row: dict | None):
    """What the preview draws: an instruction row's messages, a preference row whole (shown as a pair)."""
    if row is None:
        return None
    return row.get("messages", row)


def placeholder_names(analysis: Analysis) -> list[str]:
    """Names of the {{placeholders}} left in the rows, in order of first appearance."""
    from backend.data.textrules import placeholders

    names: dict[str, None] = {}
    for row in analysis.rows:
        messages = row.get("messages") or [m for k in ("prompt", "chosen", "rejected", "completion")
                                           for m in row.get(k, [])]
        for message in messages:
            for name in placeholders(message["content"]):
                names.setdefault(name, None)
    return list(names)


def parse_pairs(text: str, what: str) -> dict[str, str]:
    """'a=b' pairs, one per line or comma-separated -> dict; blank values are skipped."""
    pairs: dict[str, str] = {}
    for chunk in (text or "").replace(",", "\n").splitlines():
        if not chunk.strip():
            continue
        key, sep, value = chunk.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{what}: '{chunk.strip()}' is not NAME=VALUE")
        if value.strip():
            pairs[key.strip()] = value.strip()
    return pairs


def save(workspace: Workspace, analysis: Analysis, name: str, eval_ratio: float, seed: int,
         overwrite: bool) -> Path:
    """Write the fixed rows as workspace dataset `name` with its train / eval split."""
    from backend.data.saved_datasets import save_dataset

    steps = list(analysis.steps)
    if analysis.rejected:
        steps.insert(0, {"id": "drop_schema_errors", "params": {}, "changed": 0, "removed": len(analysis.rejected)})
    return save_dataset(workspace.datasets_dir, name, analysis.rows, source=analysis.source_meta, fixes=steps,
                        rows_before=analysis.total, eval_ratio=float(eval_ratio), seed=int(seed), overwrite=overwrite)


def workspace_datasets(workspace: Workspace) -> list[str]:
    from backend.data.saved_datasets import list_workspace_datasets

    return [meta["name"] for meta in list_workspace_datasets(workspace.datasets_dir)]


def local_models(workspace: Workspace) -> list[str]:
    """'demo' first, then the other model folders of the workspace."""
    names = ["demo"]
    if workspace.models_dir.is_dir():
        names += sorted(str(p) for p in workspace.models_dir.iterdir() if p.is_dir() and p.name != "demo"
                        and not p.name.startswith("."))
    return names
