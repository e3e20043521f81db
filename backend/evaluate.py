"""`python -m backend.evaluate`: score checkpoints (backend/evaluation/cli.py), or judge their answers
with a judge model (backend/judge/cli.py). The entry point stands above both, so the evaluation
package never imports the judge, which reads the Chat tab's votes."""

import sys

from backend.evaluation.cli import build_parser, evaluate_main
from backend.judge.cli import add_judge_arguments, judge_main, wants_judge
from backend.runs.workspace import Workspace


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    add_judge_arguments(parser)
    args = parser.parse_args(argv)
    args.workspace = Workspace(args.workspace) if args.workspace else None
    if wants_judge(args):  # the judge reads answers the run holds: no model is loaded
        return judge_main(args)
    return evaluate_main(args)


if __name__ == "__main__":
    sys.exit(main())
