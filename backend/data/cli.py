"""python -m backend.data check FILE ... | fix FILE --out NAME ...

Exit codes: 0 the file loads and no check of severity `error` fires (fix: the
dataset was saved); 1 error-severity findings; 2 the file (or a model, or an
argument) cannot be used at all. Never a traceback for bad input.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from backend.config import OVERFLOW, RunConfig
from backend.data.errors import DataError
from backend.data.fix_table import add_cli_flags, plan_values
from backend.data.fixes import FixPlan
from backend.data.identity_rows import fill_row, identity_values
from backend.data.load import load_file_rows
from backend.data.prepare import DataSession, load_model_tokenizer, model_tokenizer_and_template
from backend.data.resolve import DatasetNotFound, resolve_dataset
from backend.data.saved_datasets import validate_name
from backend.data.template_preview import preview_text, template_preview
from backend.messages import msg
from backend.runs.workspace import Workspace

EXIT_OK, EXIT_FINDINGS, EXIT_UNREADABLE = 0, 1, 2


def parse_mapping(items: list[str] | None) -> dict[str, str] | None:
    """['instruction=question,output=answer', 'system=sys'] -> a dict."""
    mapping: dict[str, str] = {}
    for item in items or []:
        for pair in item.split(","):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise ValueError(f"--mapping takes FIELD=COLUMN pairs, got {pair!r}")
            mapping[key.strip()] = value.strip()
    return mapping or None


def parse_fill(items: list[str] | None) -> dict[str, str]:
    values = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--fill takes NAME=VALUE, got {item!r}")
        values[key.strip()] = value
    return values


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a .json/.jsonl/.csv/.tsv/.parquet file, a LLaMA-Factory data folder, or the name of "
                                "a dataset saved in the workspace (datasets/NAME, e.g. by fix --out NAME)")
    defaults = RunConfig()  # one source for what a run does by default
    p.add_argument("--model", help="'demo' or a local model folder: its tokenizer counts tokens")
    p.add_argument("--cutoff", type=int, default=defaults.cutoff_len,
                   help=f"the run's cutoff_len in tokens (default {defaults.cutoff_len}, RunConfig's)")
    p.add_argument("--mapping", action="append", help="FIELD=COLUMN pairs, e.g. instruction=question,output=answer")
    p.add_argument("--dataset", help="dataset name inside a dataset_info.json folder")
    p.add_argument("--workspace", default="workspace", help="workspace folder (default ./workspace)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    for field, placeholder in (("identity_name", "{{name}}"), ("identity_author", "{{author}}")):
        p.add_argument("--" + field.replace("_", "-"), dest=field, default=getattr(defaults, field), metavar="TEXT",
                       help=f"the run's {field}, what Train fills {placeholder} with (default "
                            f"{getattr(defaults, field)!r}, RunConfig's); '' leaves {placeholder} unfilled")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m backend.data", description="Check and fix instruction and preference data.")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="report what is wrong with a data file")
    _common(check)
    check.add_argument("--all-rows", action="store_true", help="with --json: list every flagged row, not examples")
    check.add_argument("--show-template", type=int, metavar="ROW",
                       help="with --model: print row ROW of the file (0 = the first, as the report numbers rows) "
                            "rendered through the chat template, the tokens that train marked apart from the masked "
                            "ones, and the EOS after each answer")
    check.add_argument("--chat-template", default="auto",
                       help="the run's chat_template: auto (default), own, gemma, llama3, chatml")
    check.add_argument("--overflow", choices=OVERFLOW, default="truncate",
                       help="the run's overflow: what training does with rows over --cutoff, cut them (truncate, "
                            "the default) or leave them out (drop); the over_cutoff check says which")
    fix = sub.add_parser("fix", help="apply fixes and save a workspace dataset (the file is not modified)")
    _common(fix)
    fix.add_argument("--out", required=True, help="name of the workspace dataset to write")
    add_cli_flags(fix)  # one flag per fix option, from the fix table
    fix.add_argument("--eval-ratio", type=float, default=0.0, help="share of rows held out as eval.jsonl")
    fix.add_argument("--seed", type=int, default=42, help="seed of the train / eval split")
    fix.add_argument("--overwrite", action="store_true")
    return parser


def run_check(args) -> int:
    from backend.data.checks import check_file

    if args.show_template is not None and not args.model:
        raise ValueError("--show-template renders a row through a model's chat template: add --model demo or --model PATH")
    tokenizer, template = model_tokenizer_and_template(args.model, Path(args.workspace), args.chat_template)
    report = check_file(
        args.file, tokenizer=tokenizer, model=args.model, cutoff_len=args.cutoff,
        mapping=parse_mapping(args.mapping), dataset=args.dataset, overflow=args.overflow,
        identity=identity_values(args),
    )
    shown = show_template(args, tokenizer, template) if args.show_template is not None else None
    if args.json:
        out = report.to_dict(all_rows=args.all_rows)
        if shown is not None:
            out["template_preview"] = {**shown, "template": template.as_dict()}
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(report.to_text())
        if shown is not None:
            print("\n" + preview_text(shown, template.name))
    return report.exit_code


def show_template(args, tokenizer, template) -> dict:
    """File row `--show-template` (0-based, as the report numbers rows) as the worker encodes it."""

    loaded = load_file_rows(args.file, parse_mapping(args.mapping), args.dataset)
    number = args.show_template
    if not 0 <= number < loaded.total:
        raise ValueError(str(msg("template.show.row", row=number, count=loaded.total, last=max(loaded.total - 1, 0))))
    if number not in loaded.indices:
        raise ValueError(str(msg("template.show.unusable", row=number)))
    row = fill_row(loaded.rows[loaded.indices.index(number)], identity_values(args))  # as the run trains it
    return template_preview(tokenizer, row["messages"], args.cutoff, row.get("tools"))


def run_fix(args) -> int:
    validate_name(args.out)
    plan = FixPlan(**{**plan_values(vars(args)), "fill": parse_fill(args.fill)})
    if plan.over_cutoff and not args.model:
        raise ValueError("--over-cutoff counts tokens: add --model demo or --model PATH")
    tokenizer = load_model_tokenizer(args.model, Path(args.workspace))
    session = DataSession(args.file, parse_mapping(args.mapping), args.dataset)
    fixed = session.analyse(plan, tokenizer, args.model, args.cutoff, check=False, identity=identity_values(args))
    folder = fixed.save(Workspace(Path(args.workspace)).datasets_dir, args.out, eval_ratio=args.eval_ratio,
                        seed=args.seed, overwrite=args.overwrite)
    steps = fixed.saved_steps()
    result = {"dataset": str(folder), "rows_before": fixed.total, "rows_after": len(fixed.rows), "fixes": steps,
              "warnings": [str(w) for w in fixed.warnings]}  # a --fill at odds with --identity-name / -author
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        for warning in result["warnings"]:
            print(f"warning: {warning}")
        for s in steps:
            print(f"{s['id']:22} changed {s['changed']:6}  removed {s['removed']:6}")
        print(f"saved {folder}: {fixed.total} rows -> {len(fixed.rows)}")
    return EXIT_OK


def show_model_progress() -> None:
    """The model stage's lines (a first --model demo builds the model for minutes) on stderr, so a
    user sees what the wait is for; stdout stays the report (one JSON object with --json)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    stage_log = logging.getLogger("backend.train")
    stage_log.addHandler(handler)
    stage_log.setLevel(logging.INFO)
    stage_log.propagate = False


def data_source(file: str, workspace: str) -> str:
    """FILE as given when it exists; else what a run's `dataset:` means by that name (a dataset saved
    in the workspace, or demo / identity / demo-pairs), so a dataset is checked by the name it trains
    under. A name that is neither stays as given: the data backend then says it is missing."""
    if Path(file).exists():
        return file

    try:
        return str(resolve_dataset(file, Workspace(Path(workspace))))
    except DatasetNotFound:
        return file


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    show_model_progress()
    try:
        args.file = data_source(args.file, args.workspace)
        return run_check(args) if args.command == "check" else run_fix(args)
    except DataError as e:
        _fail(args, e.message, e.to_dict())
    except (ValueError, FileExistsError) as e:
        _fail(args, str(e), {"error": str(e)})
    except BrokenPipeError:  # output piped into `head`: not an error of ours
        sys.stderr.close()
        return EXIT_OK
    return EXIT_UNREADABLE


def _fail(args, message: str, payload: dict) -> None:
    if args.json:
        print(json.dumps(payload, ensure_ascii=False))
    print(f"error: {message}", file=sys.stderr)
