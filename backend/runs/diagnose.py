"""One zip a user attaches to a bug report: a run's files, the library versions, the hardware, the app's
flags and the OS, with every secret removed (docs/CONTRACTS.md, "The diagnostics zip").

    report = diagnostics_zip(workspace, "20250101-120000-demo", Path("diag.zip"))

The run id comes from the user, so it must name a run folder of the workspace (a plain name, never a path);
the zip is written under a temporary name beside its target and renamed, so a zip that exists is whole.
Redaction (backend/runs/redaction.py) runs on each member's text before it is written: nothing secret
reaches the disk inside the zip, the manifest included.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from backend.messages import UserError, msg
from backend.runs import machine_report
from backend.runs.files import (
    CONFIG_FILE,
    DEBUG_LOG_FILE,
    LOG_FILE,
    METRICS_FILE,
    STATUS_FILE,
    SUMMARY_FILE,
    list_run_ids,
)
from backend.runs.redaction import Redactor, home_dir
from backend.storage.atomic_files import read_json
from backend.storage.safe_names import is_plain_name, path_inside

LOG_LINES = 500  # train.log's last lines: the error and what led to it, not hours of progress bars
RUN_FILES = (CONFIG_FILE, STATUS_FILE, SUMMARY_FILE, LOG_FILE, METRICS_FILE)
LOG_FILES = (LOG_FILE, DEBUG_LOG_FILE)  # their last LOG_LINES lines; debug.log only when the run has one
DIAGNOSTICS_DIR = "diagnostics"  # workspace/diagnostics/<run>-<time>.zip, where the Runs tab writes
MANIFEST = "manifest.json"


class DiagnoseError(UserError, ValueError):
    """The zip cannot be made: an unknown run, an output path that cannot be used; the message says why."""


@dataclass
class DiagnosticsReport:
    path: Path
    run_id: str
    files: list[dict] = field(default_factory=list)     # {"name", "bytes", "source", "redacted": {kind: n}}
    missing: list[str] = field(default_factory=list)    # the run's files that did not exist
    redacted: dict[str, int] = field(default_factory=dict)  # kind -> replacements, over every member
    redacted_env: list[str] = field(default_factory=list)   # the variables whose values were removed

    def manifest(self) -> dict:
        return {"run_id": self.run_id, "made_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "files": self.files,
                "missing": self.missing, "redacted": self.redacted, "redacted_env": self.redacted_env,
                "note": "Secrets are replaced by <redacted:KIND> and the home folder by ~ in every file."}


def run_folder(workspace, run_id: object) -> Path:
    """The folder of run `run_id` in `workspace`; DiagnoseError unless it is a plain name of a run there."""
    runs_dir = Path(workspace.runs_dir)
    known = list_run_ids(runs_dir)
    if not isinstance(run_id, str) or not is_plain_name(run_id) or run_id not in known:
        shown = ", ".join(known[:5])  # the newest
        raise DiagnoseError(msg("diagnose.no_run", run_id=run_id, folder=str(runs_dir), known=shown)
                            if known else msg("diagnose.no_runs", run_id=run_id, folder=str(runs_dir)))
    return path_inside(runs_dir, run_id)


def checked_out_path(out: object, run_dir: Path) -> Path:
    """`out` as a path the zip may be written to: a .zip file in a folder that exists, not inside the run."""
    path = Path(str(out or "")).expanduser()
    if path.suffix.lower() != ".zip" or not path.stem:
        raise DiagnoseError(msg("diagnose.out_not_zip", path=str(out), example=f"{run_dir.name}-diagnostics.zip"))
    if path.is_dir():
        raise DiagnoseError(msg("diagnose.out_is_folder", path=str(path)))
    if not path.parent.resolve().is_dir():
        raise DiagnoseError(msg("diagnose.out_no_folder", path=str(path), folder=str(path.parent)))
    if path.exists():
        raise DiagnoseError(msg("diagnose.out_exists", path=str(path)))
    if path.resolve().is_relative_to(run_dir.resolve()):  # a run folder is the worker's alone
        raise DiagnoseError(msg("diagnose.out_in_run", path=str(path), run_dir=str(run_dir)))
    return path


def workspace_out_path(workspace, run_id: str) -> Path:
    """workspace/diagnostics/<run>-<YYYYmmdd-HHMMSS>[-N].zip, a name not taken yet: it is built from a run
    id run_folder accepted, and path_inside keeps it a direct child of that folder."""
    folder = Path(workspace.root) / DIAGNOSTICS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    stamp = f"{run_id}-{time.strftime('%Y%m%d-%H%M%S')}"
    for n in range(1, 1000):  # two clicks within a second
        path = path_inside(folder, f"{stamp}.zip" if n == 1 else f"{stamp}-{n}.zip")
        if not path.exists():
            return path
    raise DiagnoseError(msg("diagnose.out_exists", path=str(path)))


def last_lines(path: Path, count: int = LOG_LINES, block: int = 65536) -> tuple[str, bool]:
    """(the last `count` lines of a text file, whether earlier lines were left out), read from the end:
    a train.log of gigabytes costs a few blocks."""
    with path.open("rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        data, start = b"", end
        while start > 0 and data.count(b"\n") <= count:
            start = max(0, start - block)
            handle.seek(start)
            data = handle.read(end - start)
    lines = data.splitlines(keepends=True)
    trimmed = start > 0 or len(lines) > count
    return b"".join(lines[-count:]).decode("utf-8", errors="replace"), trimmed


def diagnostics_zip(workspace, run_id: object, out_path: Path | str | None = None, app_argv: list[str] | None = None,
                    environ: dict[str, str] | None = None) -> DiagnosticsReport:
    """Write the diagnostics zip of run `run_id` to `out_path` (None: workspace/diagnostics/<run>-<time>.zip)
    and return what it holds. `app_argv`: the app's sys.argv when the app makes it (its flags are then
    recorded, redacted)."""
    run_dir = run_folder(workspace, run_id)
    out = checked_out_path(workspace_out_path(workspace, run_id) if out_path is None else out_path, run_dir)
    environ = dict(os.environ if environ is None else environ)
    status = read_json(run_dir / STATUS_FILE, {}) or {}
    redactor = _redactor(workspace, environ, app_argv, status)
    report = DiagnosticsReport(path=out, run_id=run_id, redacted_env=redactor.env_names)
    members = _run_members(run_dir, report) + _workspace_members(workspace) + _machine_members(workspace, app_argv,
                                                                                                 status)
    totals: Counter = Counter()
    written = []
    for name, text, source in members:
        counts: Counter = Counter()
        clean = redactor.text(text, counts)
        totals.update(counts)
        written.append((name, clean))
        report.files.append({"name": name, "bytes": len(clean.encode("utf-8")), "source": source,
                             "redacted": dict(sorted(counts.items()))})
    report.redacted = dict(sorted(totals.items()))
    manifest = redactor.text(json.dumps(report.manifest(), indent=2, ensure_ascii=False), Counter())
    _write_zip(out, [*written, (MANIFEST, manifest)])
    return report


def _redactor(workspace, environ: dict[str, str], app_argv: list[str] | None, status: dict) -> Redactor:
    redactor = Redactor(home=environ.get("HOME") or home_dir())
    redactor.add_env(environ)
    redactor.add_argv(app_argv or [])
    redactor.add_argv(status.get("command") or [])
    for command in status.get("node_commands") or []:
        redactor.add_argv(command)
    redactor.add_settings(read_json(Path(workspace.settings_file), {}))
    return redactor


def _run_members(run_dir: Path, report: DiagnosticsReport) -> list[tuple[str, str, str]]:
    members = []
    for name in (*RUN_FILES, DEBUG_LOG_FILE):
        path = run_dir / name
        if not path.is_file():
            if name in RUN_FILES:
                report.missing.append(name)
            continue
        if name in LOG_FILES:
            text, trimmed = last_lines(path)
            source = f"the last {LOG_LINES} lines of {name}" if trimmed else name
        else:
            text, source = path.read_text(encoding="utf-8", errors="replace"), name
        members.append((name, text, source))
    return members


def _workspace_members(workspace) -> list[tuple[str, str, str]]:
    settings = Path(workspace.settings_file)
    if not settings.is_file():
        return []
    return [("settings.json", settings.read_text(encoding="utf-8", errors="replace"), "the workspace's settings.json")]


def _machine_members(workspace, app_argv: list[str] | None, status: dict) -> list[tuple[str, str, str]]:
    def as_json(data) -> str:
        return json.dumps(data, indent=2, ensure_ascii=False, default=str)

    return [("versions.json", as_json(machine_report.library_versions()), "installed package metadata"),
            ("hardware.json", as_json(machine_report.hardware(Path(workspace.root))), "CPU, GPUs, RAM, free disk"),
            ("system.json", as_json(machine_report.system(app_argv, status.get("command"))),
             "OS, Python, the app's flags, the launch command, library environment variables")]


def _write_zip(out: Path, members: list[tuple[str, str]]) -> None:
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, text in members:
                archive.writestr(name, text.encode("utf-8"))
        os.replace(tmp, out)
    except OSError as error:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise DiagnoseError(msg("diagnose.write_failed", path=str(out), error=error)) from error
