"""The judge on the command line, through `python -m backend.evaluate`:

    python -m backend.evaluate --run R --judge URL --judge-model NAME --pairwise A B [--judge-source S]
    python -m backend.evaluate --run R --judge URL --judge-model NAME --graded [--checkpoint ...] [--rubric FILE]
    python -m backend.evaluate --run R --judge URL --judge-model NAME --calibrate        # against the votes
    python -m backend.evaluate --run R --judge URL --judge-model NAME --tune-prompts T1.txt T2.txt
    python -m backend.evaluate --run R --judge URL --judge-model NAME --eval-set-from "..." [--eval-set-name N]
    python -m backend.evaluate --run R --print-judge-prompts

The number of calls is printed (stderr) before the first; --dry-run stops there.
No torch is imported on this path: the answers come from files the run already
holds (backend/judge/sources.py). Exit 0, or 2 with a sentence on a refusal.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from backend.judge import calibration, evalset, runner, sources, templates
from backend.judge.asking import Asker
from backend.judge.client import DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT_S, JudgeClient, JudgeEndpoint
from backend.messages import UserError, msg
from backend.runs.jobs import COMPLETED, run_job, write_progress
from backend.runs.workspace import Workspace

KEY_ENV = "FINETUNE_STUDIO_JUDGE_KEY"


def add_judge_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("judge (backend/judge/)")
    group.add_argument("--judge", metavar="URL", help="an OpenAI-compatible server's base URL, the judge")
    group.add_argument("--judge-model", metavar="NAME", default="", help="the judge's model name on that server")
    group.add_argument("--judge-key", metavar="KEY", default=os.environ.get(KEY_ENV),
                       help=f"the judge's API key (default: ${KEY_ENV}; none for a local server)")
    group.add_argument("--judge-timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per judge call")
    group.add_argument("--judge-max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                       help="the longest judge answer, in tokens (reason and verdict)")
    group.add_argument("--pairwise", nargs=2, metavar=("A", "B"), help="judge A against B, both orders")
    group.add_argument("--graded", action="store_true", help="grade each --checkpoint's answers 1-5 on a rubric")
    group.add_argument("--rubric", type=Path, metavar="FILE", help="a 1-5 rubric file (one line per grade)")
    group.add_argument("--rubric-kind", default=templates.DEFAULT_KIND, choices=tuple(templates.RUBRICS),
                       help="the default rubric of this task kind, without --rubric")
    group.add_argument("--judge-prompt", type=Path, metavar="FILE", help="the judge template to use (edited)")
    group.add_argument("--judge-source", default="identity", choices=sources.SOURCES,
                       help="where the answers come from (default: the held-out identity prompts of "
                            "eval/learning.json)")
    group.add_argument("--judge-data", type=Path, metavar="FILE", help="with --judge-source file: the JSONL rows")
    group.add_argument("--judge-name", help="the result's name: RUN/eval/judge/<name>.json")
    group.add_argument("--calibrate", action="store_true", help="agreement with the Chat tab's blind votes")
    group.add_argument("--tune-prompts", nargs="+", type=Path, metavar="FILE",
                       help="pairwise templates to score on the votes; the best is kept for the run")
    group.add_argument("--eval-set-from", metavar="DESCRIPTION", help="write an eval set from a one-line description")
    group.add_argument("--eval-set-count", type=int, default=10, help="prompts to write (default 10)")
    group.add_argument("--eval-set-name", help="save the written rows as this workspace dataset")
    group.add_argument("--dry-run", action="store_true", help="print the number of judge calls and stop")
    group.add_argument("--print-judge-prompts", action="store_true", help="print the default templates and rubrics")


def wants_judge(args: argparse.Namespace) -> bool:
    return bool(args.judge or args.print_judge_prompts)


def judge_main(args: argparse.Namespace) -> int:
    if args.print_judge_prompts:
        print(templates.printable_defaults(), end="")
        return 0
    code, refused = run_job(lambda: _run(args), args.progress, UserError, "judge refused")
    if refused:
        return refused
    write_progress(args.progress, state=COMPLETED, stage=msg("job.stage.done"))
    return code


def _run(args: argparse.Namespace) -> int:
    endpoint = JudgeEndpoint(args.judge, args.judge_model or "", args.judge_key, args.judge_timeout,
                             args.judge_max_tokens)
    workspace = args.workspace or Workspace.for_run_dir(args.run)
    if args.eval_set_from is not None:
        return _evalset(args, JudgeClient(endpoint), workspace)
    if not (args.pairwise or args.graded or args.calibrate or args.tune_prompts):
        raise UserError(msg("judge.needs_mode"))
    mode = ("calibration" if args.calibrate or args.tune_prompts else "pairwise" if args.pairwise else "graded")
    kind = "graded" if mode == "graded" else "pairwise"
    template = (templates.check_template(templates.read_text(args.judge_prompt), kind, str(args.judge_prompt))
                if args.judge_prompt else None)
    rubric = templates.rubric_for(path=args.rubric) if args.rubric and mode == "graded" else None
    prepared = runner.prepare_judgement(runner.Judgement(
        args.run, endpoint, mode, list(args.pairwise or args.checkpoint or []), args.judge_source, args.judge_data,
        template, rubric, args.rubric_kind, args.max_samples, args.judge_name, workspace))
    if args.tune_prompts:
        return _tune(args, prepared)
    plan = runner.plan(prepared)
    print(msg("judge.plan", **plan), file=sys.stderr, flush=True)
    write_progress(args.progress, stage=msg("judge.plan", **plan), total=plan["calls"])
    if args.dry_run:
        print(json.dumps({"plan": plan, "mode": mode}, indent=2))
        return 0
    result, path = runner.run_judgement(prepared)
    write_progress(args.progress, done=prepared.asker.calls, result=str(path))
    asker = prepared.asker
    if asker.unparsed:
        print(msg("judge.unparsed", n=asker.unparsed), file=sys.stderr)
    print(json.dumps({**result, "file": str(path), "calls": asker.calls, "from_cache": asker.from_cache},
                     indent=2, ensure_ascii=False) if args.json else _table(result, path, asker))
    return 0


def _tune(args: argparse.Namespace, prepared: runner.Prepared) -> int:
    candidates = {str(p): templates.read_text(p) for p in args.tune_prompts}
    asker = prepared.asker
    summary = calibration.tune(asker, prepared.rows, candidates, args.run)
    print(json.dumps({**summary, "calls": asker.calls, "from_cache": asker.from_cache}, indent=2,
                     ensure_ascii=False))
    return 0


def _evalset(args: argparse.Namespace, client: JudgeClient, workspace: Workspace) -> int:
    rows = evalset.write_evalset(client, args.eval_set_from, args.eval_set_count)
    print(json.dumps(rows, indent=2, ensure_ascii=False))
    if args.eval_set_name:
        folder = evalset.save_evalset(workspace.datasets_dir, args.eval_set_name, rows, args.eval_set_from)
        print(f"Saved {len(rows)} rows as dataset {folder}", file=sys.stderr)
    return 0


def _table(result: dict, path: Path, asker: Asker) -> str:
    lines = [f"Judge {asker.client.endpoint.model} at {asker.client.endpoint.base_url}: {asker.calls} calls, "
             f"{asker.from_cache} from the cache; written to {path}"]
    if result["mode"] == "pairwise":
        low, high = result["interval"] or (None, None)
        rate = "-" if result["win_rate"] is None else f"{result['win_rate']:.3f} [{low:.3f}, {high:.3f}]"
        lines += [f"{result['a']} over {result['b']}: win rate {rate} (Wilson 95%, ties as half) on "
                  f"{result['judged']} of {result['rows']} rows",
                  f"wins {result['wins']}  losses {result['losses']}  ties {result['ties']}  inconsistent across "
                  f"orders {result['inconsistent']}  unparsed rows {result['unparsed_rows']}"]
    elif result["mode"] == "graded":
        lines.append(f"{'checkpoint':<18}{'mean':>8}{'std':>8}{'n':>6}{'unparsed':>10}")
        for name, g in result["checkpoints"].items():
            mean = "-" if g["mean"] is None else f"{g['mean']:.2f}"
            std = "-" if g["std"] is None else f"{g['std']:.2f}"
            lines.append(f"{name:<18}{mean:>8}{std:>8}{g['n']:>6}{g['unparsed']:>10}")
    else:
        kappa = "-" if result["kappa"] is None else f"{result['kappa']:.2f}"
        share = "-" if result["agreement"] is None else f"{result['agreement']:.2f}"
        lines.append(f"agreement with your votes {share}, Cohen's kappa {kappa}, on {result['votes']} votes")
        lines += result["warnings"]
    return "\n".join(lines)
