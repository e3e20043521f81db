"""python -m backend.runs diagnose RUN --out FILE.zip [--workspace DIR]

Writes the run's diagnostics zip (backend/runs/diagnose.py): its files, the library versions, the hardware,
the OS, with every secret removed, and prints what it holds. Exit 0 when the zip is written, 2 on a refusal
(an unknown run, an output path that cannot be used), with a one-line reason. Nothing heavy is imported:
a refusal costs a fraction of a second.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from backend.runs.diagnose import DiagnoseError, DiagnosticsReport, diagnostics_zip
from backend.runs.workspace import DEFAULT_WORKSPACE, Workspace

EXIT_OK, EXIT_REFUSED = 0, 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m backend.runs", description="Tools for the runs of a workspace.")
    commands = parser.add_subparsers(dest="command", required=True)
    diagnose = commands.add_parser("diagnose", help="write a run's diagnostics zip for a bug report, secrets removed")
    diagnose.add_argument("run", help="the run id: a folder name under workspace/runs/")
    diagnose.add_argument("--out", required=True, type=Path, help="the zip to write, e.g. diagnostics.zip")
    diagnose.add_argument("--workspace", type=Path, default=DEFAULT_WORKSPACE,
                          help="the workspace that holds the run (default ./workspace)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = diagnostics_zip(Workspace(args.workspace), args.run, args.out)
    except DiagnoseError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_REFUSED
    print(summary_lines(report))
    return EXIT_OK


def summary_lines(report: DiagnosticsReport) -> str:
    lines = [f"Wrote {report.path} for run {report.run_id}:"]
    lines += [f"  {f['name']:<14} {f['bytes']:>9} bytes  {f['source']}" for f in report.files]
    if report.missing:
        lines.append(f"  not in the run folder: {', '.join(report.missing)}")
    removed = ", ".join(f"{kind} {count}" for kind, count in report.redacted.items()) or "nothing"
    lines.append(f"  redacted: {removed} (the values are not kept anywhere)")
    return "\n".join(lines)
