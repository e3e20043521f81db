"""Per-checkpoint evaluation: eval loss / perplexity over the assistant tokens,
and greedy answers scored with BLEU, ROUGE-1/2/L and exact match.

    python -m backend.evaluate --run RUN [--checkpoint NAME ...] [--data FILE] [--json] [--max-samples N]
                               [--workspace DIR] [--scorers SPECS | --scorers FILE.yaml]
    python -m backend.evaluate --run RUN --benchmark TASK [TASK ...]   # lm-evaluation-harness (benchmarks.py)
    python -m backend.evaluate --run RUN --benchmark TASK ... --local-model PATH ...   # + models on this machine
    python -m backend.evaluate --run RUN --learning [--checkpoint NAME ...]   # learned / kept (backend/learning/)
    python -m backend.evaluate --run RUN --judge URL --judge-model NAME --pairwise A B   # a judge model (backend/judge/)

Prints a table of the scores (one JSON object with --json); a run that
continues another is shown beside its parent, with the drops flagged. Under
the UI's background launcher (`--progress`) the job reports through its
progress file. Exit 0 on success, 2 on a refusal (with a one-line reason).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from backend.evaluation.benchmarks import as_json, run_benchmarks, summary_table
from backend.evaluation.evaluator import DEFAULT_BATCH_SIZE, DEFAULT_MAX_NEW_TOKENS, evaluate_run
from backend.evaluation.learning_run import report_for_run
from backend.evaluation.quality_drops import kept_lines, run_drops
from backend.learning.table import report_table
from backend.messages import UserError, msg
from backend.runs.jobs import COMPLETED, run_job, write_progress


def build_parser() -> argparse.ArgumentParser:
    """The evaluation's arguments; the entry point (backend/evaluate.py) adds the judge's."""
    parser = argparse.ArgumentParser(prog="python -m backend.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, type=Path, help="run folder (workspace/runs/<run-id>)")
    parser.add_argument("--checkpoint", nargs="+", help="names such as base checkpoint-20 final (default: all)")
    parser.add_argument("--data", type=Path, help="evaluation file in any supported format (default: held-out split)")
    parser.add_argument("--max-samples", type=int, help="evaluate the first N rows only")
    parser.add_argument("--max-new-tokens", type=int, default=DEFAULT_MAX_NEW_TOKENS)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    parser.add_argument("--scorers", metavar="SPECS",
                        help="checks to score every answer with, as YAML / JSON text or a .yaml / .yml / .json file: "
                             "a list such as '[{kind: contains, text: Paris}, {kind: number, tolerance: 0.01}]' "
                             "(kinds: exact_match, format, length, contains, not_contains, regex, json, number, "
                             "rouge_l, bleu, right_answer; docs/EVALUATE_EXPORT.md)")
    parser.add_argument("--benchmark", nargs="+", metavar="TASK",
                        help="run lm-evaluation-harness tasks instead: studio_facts_choice studio_facts_answer "
                             "studio_general_choice, a task YAML file or folder, or an lm-eval task name "
                             "(--max-samples limits the questions per task)")
    parser.add_argument("--learning", action="store_true",
                        help="the learning report instead: the base and each checkpoint on held-out prompts of the "
                             "run's data (learned) and general questions (kept), written to eval/learning.json")
    parser.add_argument("--local-model", nargs="+", metavar="PATH",
                        help="with --benchmark: also benchmark these models on this machine (a folder with config.json "
                             "or a GGUF file), beside the checkpoints --checkpoint names (none without it)")
    parser.add_argument("--no-chat-template", action="store_true",
                        help="benchmark prompts as plain text, not in the run's chat template")
    parser.add_argument("--workspace", type=Path, default=None,
                        help="where the base model named in config.yaml and its dataset are found (default: the "
                             "workspace that holds the run folder, else ./workspace)")
    parser.add_argument("--progress", type=Path, help=argparse.SUPPRESS)  # set by the UI's background launcher
    return parser


def evaluate_main(args: argparse.Namespace) -> int:
    """The evaluation `args` ask for; their workspace is a Workspace, or None for the run's own."""
    if args.local_model and not args.benchmark:
        print(msg("benchmark.local_alone"), file=sys.stderr)
        return 2
    if args.benchmark:
        return benchmark_main(args)
    if args.learning:
        return learning_main(args)
    summary, refused = run_job(lambda: evaluate_run(args.run, args.checkpoint, args.data, args.max_samples,
                                                    args.max_new_tokens, args.batch_size, progress=args.progress,
                                                    workspace=args.workspace, scorers=args.scorers),
                               args.progress, UserError, "evaluation failed")  # a moved base model too
    if refused:
        return refused
    write_progress(args.progress, state=COMPLETED, stage=msg("job.stage.done"))
    if summary.get("kept"):
        summary["kept"]["drops"] = [str(m) for m in run_drops(args.run)]
    print(json.dumps(summary, indent=2, ensure_ascii=False) if args.json else _table(summary, args.run))
    return 0


def benchmark_main(args: argparse.Namespace) -> int:
    # UserError: BenchmarkError, and a model or checkpoint name refused on the way.
    summary, refused = run_job(lambda: run_benchmarks(args.run, args.benchmark, args.checkpoint, args.max_samples,
                                                      not args.no_chat_template, args.batch_size,
                                                      progress=args.progress, workspace=args.workspace,
                                                      local_models=args.local_model),
                               args.progress, UserError, "benchmark failed")
    if refused:
        return refused
    write_progress(args.progress, state=COMPLETED, stage=msg("job.stage.done"))
    print(as_json(summary) if args.json else summary_table(summary))
    return 0


def learning_main(args: argparse.Namespace) -> int:
    def progress(checkpoint: str, done: int, total: int) -> None:
        stage = msg("learning.stage", checkpoint=checkpoint)
        write_progress(args.progress, stage=stage, done=done, total=total)
        if args.progress is None:  # by hand: the wait says what it waits for on stderr (stdout is the table)
            print(f"{stage}: answer {done} / {total}", file=sys.stderr, flush=True)

    report, refused = run_job(lambda: report_for_run(args.run, args.checkpoint, args.workspace, progress),
                              args.progress, UserError, "learning report failed")
    if refused:
        return refused
    write_progress(args.progress, state=COMPLETED, stage=msg("job.stage.done"))
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else report_table(report))
    return 0


def _table(summary: dict, run_dir: Path) -> str:
    columns = ("eval_loss", "perplexity", "bleu", "rouge1", "rouge2", "rougeL", "exact_match")
    if any("preference_accuracy" in m for m in summary["results"].values()):
        columns = ("preference_accuracy", "mean_margin", "logp_accuracy")
    lines = [f"Run {summary['run']}: {summary['num_samples']} rows of {summary['data']}",
             f"{'checkpoint':<18}" + "".join(f"{c:>{max(12, len(c) + 2)}}" for c in columns)]
    for name, metrics in summary["results"].items():
        lines.append(f"{name:<18}" + "".join(f"{metrics[c]:>{max(12, len(c) + 2)}.4g}" for c in columns))
    lines += _scorer_lines(summary["results"])
    if summary.get("kept"):
        lines += kept_lines(summary["kept"], run_dir)
    if summary.get("kept_error"):
        lines.append(f"Not compared with the run it continues: {summary['kept_error']}")
    return "\n".join(lines)


def _scorer_lines(results: dict) -> list[str]:
    """The share of rows passing each chosen scorer, per checkpoint (none chosen: no lines)."""
    names = list(dict.fromkeys(n for metrics in results.values() for n in metrics.get("scorers", {})))
    if not names:
        return []
    lines = ["Rows passing each scorer:", f"{'checkpoint':<18}" + "".join(f"{n:>{max(12, len(n) + 2)}}" for n in names)]
    for name, metrics in results.items():
        shares = [(metrics.get("scorers", {}).get(n) or {}).get("pass") for n in names]
        lines.append(f"{name:<18}" + "".join(f"{'-' if v is None else f'{v:.0%}':>{max(12, len(n) + 2)}}"
                                             for n, v in zip(names, shares)))
    return lines
