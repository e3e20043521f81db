"""python -m backend.models list [--json] [--workspace DIR]

Lists the language models already on this machine (backend/models/local/scan.py): source, name, path,
size, architecture, parameters, whether transformers can train it and why not, then what the scan
skipped. Exit codes: 0 listed (even when nothing was found); 2 an argument or the workspace cannot be
used, said in a sentence before anything heavy is imported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from backend.models.hardware import detect_devices
from backend.models.local.places import SOURCE_LABELS, all_places, saved_folders
from backend.models.local.scan import scan, scan_into_cache

EXIT_OK, EXIT_REFUSED = 0, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own exits with a usage dump; one sentence instead
        raise SystemExit(_refuse(f"{message[0].upper()}{message[1:]}. See `python -m backend.models --help`."))


def _refuse(sentence: str) -> int:
    print(sentence, file=sys.stderr)
    return EXIT_REFUSED


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m backend.models", description="Models already on this machine.")
    commands = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    listing = commands.add_parser("list", help="list the models found in the Hugging Face cache, Ollama, "
                                               "LM Studio, llama.cpp's cache and the workspace's model folders")
    listing.add_argument("--json", action="store_true", help="print one JSON array")
    listing.add_argument("--workspace", default=os.environ.get("FINETUNE_STUDIO_WORKSPACE", "workspace"),
                         help="workspace folder whose settings.json names more model folders (default ./workspace)")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else EXIT_REFUSED
    workspace = Path(args.workspace).expanduser()
    if workspace.exists() and not (workspace.is_dir() and os.access(workspace, os.R_OK | os.X_OK)):
        return _refuse(f"The workspace {workspace} is not a folder this user can read; give --workspace DIR, "
                       "a workspace folder (or one that does not exist yet).")

    places = all_places(saved_folders(workspace))
    devices = detect_devices()
    result = (scan_into_cache(workspace, places, devices) if workspace.is_dir() and os.access(workspace, os.W_OK)
              else None) or scan(places, devices=devices)
    if args.json:
        print(json.dumps([m.as_json() for m in result.models], indent=2, ensure_ascii=False))
    else:
        print(table(result))
    return EXIT_OK


def human_size(size: int | None) -> str:
    if not size:
        return "-"
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}" if size < 10 * scale else f"{size // scale} {unit}"
    return f"{size} B"


def human_count(count: int | None) -> str:
    if not count:
        return "-"
    for unit, scale in (("B", 10**9), ("M", 10**6), ("k", 10**3)):
        if count >= scale:
            return f"{count / scale:.3g}{unit}"
    return str(count)


def table(result) -> str:
    if not result.models:
        lines = ["No models found on this machine."]
    else:
        rows = [("source", "name", "size", "architecture", "parameters", "trainable", "path")]
        rows += [(SOURCE_LABELS.get(m.source, m.source), m.name, human_size(m.size), m.architecture or "-",
                  human_count(m.parameters), "yes" if m.trainable else "no", m.path) for m in result.models]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in rows]
        lines += [f"  {m.name}: {m.reason}" for m in result.models if m.reason]
    if result.skipped:
        lines += ["", f"Skipped ({len(result.skipped)}):"] + [f"  {reason}" for _, reason in result.skipped]
    if result.stopped_early:
        lines.append("The scan stopped early; the list above is what it found until then.")
    return "\n".join(lines)
