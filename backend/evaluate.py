"""`python -m backend.evaluate`: score checkpoints (backend/evaluation/cli.py), or judge their answers
with a judge model (backend/judge/cli.py). The entry point stands above both, so the evaluation
package never imports the judge, which reads the Chat tab's votes."""

import sys

from backend.evaluation.cli import build_parser, evaluate_main
from backend.judge.cli import add_judge_arguments, judge_main, wants_judge
from backend.runs.workspace import Workspace
from backend.training.unused_libraries import skip_bitsandbytes_for_run


def main(argv: list[str] | None = None, own_process: bool = False) -> int:
    """`own_process`: this process evaluates and ends (the command line), so it may hide the libraries the
    run does not use from itself; a caller that goes on (a test) keeps its imports as they are."""
    parser = build_parser()
    add_judge_arguments(parser)
    args = parser.parse_args(argv)
    args.workspace = Workspace(args.workspace) if args.workspace else None
    if wants_judge(args):  # the judge reads answers the run holds: no model is loaded
        return judge_main(args)
    if own_process and args.run and not args.local_model:
        skip_bitsandbytes_for_run(args.run)  # before peft's first import, for a run that quantizes nothing
    return evaluate_main(args)


if __name__ == "__main__":
    sys.exit(main(own_process=True))
