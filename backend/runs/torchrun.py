"""torchrun for runs on several machines: `python -m backend.runs.torchrun
[torchrun arguments] -m backend.train ...`.

The same launcher as `python -m torch.distributed.run` (its argument parser
and its `run`), with one difference: a node that never joins ends the
launcher after --rdzv-conf timeout=N seconds with a sentence, written into
the run's status.json by node 0, instead of a traceback (or, without a
timeout, a wait that never ends, as in
https://github.com/hiyouga/LLaMA-Factory/issues/7300).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from backend.runs.files import read_status, update_status

EXIT_FAILED = 1


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    args = get_args_parser().parse_args(argv)
    try:
        run(args)
    except ChildFailedError as error:
        # A rank failed: the worker wrote its own error into status.json and train.log.
        print(f"error: a training process failed:\n{error}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as error:  # noqa: BLE001  (only rendezvous failures are ours to explain)
        if not _is_join_failure(error):
            raise
        error_text, advice = join_failure(args, error)
        print(f"error: {error_text} Advice: {advice}", file=sys.stderr)
        run_dir = _run_dir(args.training_script_args)
        if args.node_rank == 0 and run_dir is not None and run_dir.is_dir() and \
                read_status(run_dir).get("state") not in ("completed", "stopped", "failed"):
            update_status(run_dir, state="failed", exit_code=EXIT_FAILED, ended_at=time.time(),
                          error=error_text, advice=advice)
        return EXIT_FAILED
    return 0


def _is_join_failure(error: BaseException) -> bool:
    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous import RendezvousError

    return isinstance(error, (dist.DistError, RendezvousError, TimeoutError))


def join_failure(args, error: BaseException) -> tuple[str, str]:
    """(error, advice) for a rendezvous that did not complete."""
    timeout = _timeout(args.rdzv_conf)
    where = f"{args.master_addr}:{args.master_port}"
    detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if args.node_rank == 0:
        text = (f"Not every node joined within {timeout} s: this run needs {args.nnodes} nodes, and node 0 "
                f"waited for the others at {where} ({detail}).")
        advice = ("Start the command shown for each other node (node_rank 1 to "
                  f"{int(args.nnodes) - 1}) on its machine within node_join_timeout seconds, check that they "
                  f"reach {where} (address, firewall), then start the run again.")
    else:
        text = f"Node {args.node_rank} could not join node 0 at {where} within {timeout} s ({detail})."
        advice = ("Start node 0 first (the app starts it), check master_addr and master_port and that this "
                  "machine reaches them, then run this command again.")
    return text, advice


def _timeout(rdzv_conf: str) -> str:
    for item in (rdzv_conf or "").split(","):
        key, _, value = item.partition("=")
        if key.strip() in ("timeout", "join_timeout"):
            return value.strip()
    return "600"


def _run_dir(worker_args: list[str]) -> Path | None:
    for flag, value in zip(worker_args, worker_args[1:]):
        if flag in ("--run-dir", "--resume"):
            return Path(value)
    return None


if __name__ == "__main__":
    sys.exit(main())
