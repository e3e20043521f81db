"""Exported GGUF files as chat targets: each `workspace/exports/<name>/gguf/<name>-<level>.gguf`
that an export wrote (its export_report.json lists it), tied to the run and checkpoint it was
exported from, so a column of the quantised file stands next to its adapter and the base.

The prompt is rendered by the export folder's tokenizer (the merged model's, which holds the run's
chat template) when it is there, else by the file's own `tokenizer.chat_template`. Listing reads
only small JSON files: no llama.cpp until a column answers."""

from __future__ import annotations

from pathlib import Path

from backend.chat.targets import GGUF, ChatTarget, RunChoices
from backend.export.exporter import REPORT_FILE
from backend.export.gguf_export import GGUF_FOLDER
from backend.models.loading import TOKENIZER_FILES
from backend.storage.atomic_files import read_json


def tokenizer_folder(gguf_file: Path) -> Path | None:
    """The export folder above `gguf/` when it holds a tokenizer, else None (a file on its own)."""

    folder = Path(gguf_file).resolve().parent
    if folder.name != GGUF_FOLDER:
        return None
    export = folder.parent
    has_tokenizer = (export / "tokenizer_config.json").is_file() and any(
        (export / name).is_file() for name in TOKENIZER_FILES)
    return export if has_tokenizer else None


def file_target(gguf_file: Path, source: ChatTarget | None = None, level: str | None = None) -> ChatTarget:
    """A target for one GGUF file, named by its stem (`assistant-q4_k_m`); `source` is the run's
    target it was exported from (its run, step and eval loss are shown with it)."""
    gguf_file = Path(gguf_file).resolve()
    tokenizer = tokenizer_folder(gguf_file)
    common = dict(model=str(gguf_file), checkpoint=str(gguf_file), kind=GGUF, name=gguf_file.stem,
                  tokenizer=str(tokenizer) if tokenizer else None, level=level)
    if source is None:
        return ChatTarget(**common)
    return ChatTarget(**common | dict(model=source.model, run_id=source.run_id, source=source.name, step=source.step,
                                      eval_loss=source.eval_loss, chat_template=source.chat_template))


def exported_files(exports_dir: Path) -> list[tuple[Path, str, Path]]:
    """(GGUF file, level, checkpoint it came from) of every export whose report lists GGUF files
    that are on disk, newest export first. The LoRA GGUF (an adapter, not a model) is left out."""

    found = []
    reports = [p for p in Path(exports_dir).glob(f"*/{REPORT_FILE}") if not p.parent.name.startswith(".")]
    for report_file in sorted(reports, key=lambda p: p.stat().st_mtime, reverse=True):
        report = read_json(report_file, default={}) or {}
        gguf, checkpoint = report.get("gguf") or {}, report.get("checkpoint")
        if not isinstance(gguf, dict) or not isinstance(checkpoint, str):
            continue
        folder = report_file.parent / "gguf"
        for level, entry in (gguf.get("files") or {}).items():
            file = folder / str((entry or {}).get("file", ""))
            if file.suffix == ".gguf" and file.is_file():
                found.append((file, level, Path(checkpoint)))
    return found


def run_gguf_targets(exports_dir: Path, choices: RunChoices) -> list[ChatTarget]:
    """The GGUF files exported from this run's checkpoints, each linked to its checkpoint's target
    (a checkpoint since removed, e.g. by save_total_limit, still names its run and folder)."""
    by_folder = {Path(t.checkpoint).resolve(): t for t in choices.targets if t.checkpoint}
    targets = []
    for file, level, checkpoint in exported_files(exports_dir):
        if checkpoint.resolve().parent != choices.run_dir.resolve():
            continue
        source = by_folder.get(checkpoint.resolve()) or ChatTarget(
            model=choices.model, checkpoint=str(checkpoint), run_id=choices.run_id, name=checkpoint.name,
            chat_template=choices.targets[0].chat_template)
        targets.append(file_target(file, source, level))
    return targets
