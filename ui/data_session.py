"""What the Data tab keeps between events, without gradio: the data sessions
(backend/data/prepare.py) of the files open in the tab, held by the app's
`ctx.data_sessions` (ui/context.py), and small view helpers.

The browser's state is a small dict (path, mapping, fix plan, model, cutoff, the
placeholder values the run fills (`identity`) and the token of its session
here); the rows stay on the server. A file is read when it is opened or checked
again; fixes work on the rows already read, and a page turn, a check's rows or
a save reuse the last analysis: none of them parses or checks the file again.
Only the last few sessions are kept (each holds a file's rows); a state whose
session was let go (or a restarted server) reads its file again.

Row numbers shown to the user are always rows of the source file (0-based,
like `python -m backend.data check`).
"""

from __future__ import annotations

import json
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from backend.data.fix_table import plan_values
from backend.data.fixes import FixPlan
from backend.data.prepare import PAGE_SIZE, Analysis, DataSession, load_model_tokenizer
from backend.data.saved_datasets import list_workspace_datasets, validate_name
from backend.data.template_preview import template_preview
from backend.messages import Message
from backend.models.chat_templates import KNOWN
from backend.models.offline import OFFLINE_MODELS
from backend.runs.workspace import Workspace
from ui.i18n import localize
from ui.warmup import import_heavy_libraries

__all__ = ["PAGE_SIZE", "Analysis"]
KEEP = 3  # sessions held at once (a 100,000-row file holds a few hundred MB of rows)


@dataclass
class _Kept:
    session: DataSession
    key: tuple | None = None  # (plan, model, cutoff, overflow, identity) of `analysis`
    analysis: Analysis | None = None
    template: dict | None = None  # the first row through the model's chat template (template_preview)


class DataSessions:
    """The data sessions of the files open in the Data tab, by token: the app's one set is
    `ctx.data_sessions`, so every browser's state finds its rows there."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, state: dict) -> dict:
        """Read the state's file (the one read of it) and keep it; the state, carrying its session's token."""
        session = DataSession(state["path"], state.get("mapping"))
        token = state.get("session") or secrets.token_hex(8)
        self._keep(token, _Kept(session))
        return {**state, "session": token}

    def _keep(self, token: str, kept: _Kept) -> None:
        with self._lock:
            self._kept[token] = kept
            self._kept.move_to_end(token)
            while len(self._kept) > KEEP:
                self._kept.popitem(last=False)

    def analyse(self, workspace: Workspace, state: dict, step=None) -> Analysis:
        """The state's rows after its fixes with their report, from its kept session (the last
        analysis again when nothing changed). Raises DataError / ValueError with a sentence for the user.
        `step(name, **values)` hears each slow part as it begins: "tokenizer" (model), "checks" (rows)."""

        token = state.get("session")
        with self._lock:
            kept = self._kept.get(token) if token else None
            if kept is not None:
                self._kept.move_to_end(token)
        if kept is None or kept.session.path != str(state["path"]) or kept.session.mapping != state.get("mapping"):
            kept = _Kept(DataSession(state["path"], state.get("mapping")))  # let go or never opened: read it again
            self._keep(token or secrets.token_hex(8), kept)
        plan, model, cutoff = state.get("plan") or {}, state.get("model"), int(state.get("cutoff", 256))
        overflow, identity = state.get("overflow") or "truncate", state.get("identity") or {}
        key = (json.dumps(plan, sort_keys=True), model, cutoff, overflow, json.dumps(identity, sort_keys=True))
        if kept.key != key:
            if step is not None:
                step("tokenizer", model=model or "-")
            tokenizer = load_tokenizer(workspace, model)
            if step is not None:
                step("checks", rows=kept.session.total)
            kept.analysis = kept.session.analyse(FixPlan(**plan_values(plan)), tokenizer, model, cutoff,
                                                 overflow=overflow, identity=identity)
            kept.template = first_row_template(tokenizer, kept.analysis, cutoff)
            kept.key = key
        return kept.analysis

    def template_view(self, state: dict) -> dict | None:
        """The kept first-row template preview of the state's session (None when there is none)."""
        with self._lock:
            kept = self._kept.get(state.get("session") or "")
        return kept.template if kept is not None else None


def first_row_template(tokenizer, analysis: Analysis, cutoff: int) -> dict | None:
    """The first row rendered through the template with the worker's encoding (None without a model
    or rows, and for preference rows, which the SFT encoding does not take)."""

    rows = [(index, row) for index, row in zip(analysis.indices, analysis.rows) if isinstance(row.get("messages"), list)]
    if tokenizer is None or not rows:
        return None
    index, row = rows[0]
    row = analysis.trained(row)  # as the run trains it: {{name}} / {{author}} filled
    preview = template_preview(tokenizer, row["messages"], cutoff, row.get("tools"))
    return {**preview, "template": _template_name(tokenizer), "row": index}


def _template_name(tokenizer) -> str:
    return next((name for name, known in KNOWN.items() if tokenizer.chat_template == known.template), "own")


def dataset_source(workspace: Workspace, name: str) -> Path:
    """The folder of a workspace dataset, refusing names that leave datasets/."""

    return workspace.datasets_dir / validate_name(name)


def load_tokenizer(workspace: Workspace, model: str | None):
    """The tokenizer that counts tokens ('demo' or a local folder), or None for no token counts."""

    import_heavy_libraries()
    return load_model_tokenizer(model or None, workspace.root)


def check_rows_view(analysis: Analysis, check_id: str, limit: int = 20,
                    lang: str = "en") -> list[tuple[int, list | None, list[str]]]:
    """(file row, messages as the run trains them or None, reasons in `lang`) for the first `limit`
    rows a check flags."""

    check = next((c for c in analysis.report["checks"] if c["id"] == check_id), None)
    if check is None:
        return []
    by_row = dict(zip(analysis.indices, analysis.rows))
    rejected = {item.index: item for item in analysis.rejected}
    items = []
    for row in check.get("rows", [])[:limit]:
        note = check.get("detail_messages", {}).get(str(row)) or check.get("details", {}).get(str(row))
        notes = [localize(Message.from_dict(note) or note, lang)] if note else []
        if row in rejected:  # every problem of the row, translated (the detail is the first one, in English)
            notes = [f"{where}: {localize(message, lang)}" for where, message in rejected[row].problems]
        kept = by_row.get(row)  # None for a rejected row
        items.append((row, _shown(None if kept is None else analysis.trained(kept)), notes))
    return items


def page_view(analysis: Analysis, page: int, size: int = PAGE_SIZE) -> tuple[list[tuple[int, list]], int, int]:
    """The rows of 1-based `page` as (file row, what the preview draws), the page shown, and the page count."""
    rows, page, pages = analysis.page(page, size)
    return [(index, _shown(row)) for index, row in rows], page, pages


def _shown(row: dict | None):
    """What the preview draws: an instruction row's messages, a preference row whole (shown as a pair)."""
    if row is None:
        return None
    return row.get("messages", row)


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


def workspace_datasets(workspace: Workspace) -> list[str]:
    return [meta["name"] for meta in list_workspace_datasets(workspace.datasets_dir)]


def local_models(workspace: Workspace) -> list[str]:
    """The offline models and 'demo' by name first, then the other model folders of the workspace."""

    names = [*OFFLINE_MODELS, "demo"]
    if workspace.models_dir.is_dir():
        names += sorted(str(p) for p in workspace.models_dir.iterdir() if p.is_dir() and p.name not in names
                        and not p.name.startswith("."))
    return names
