"""The user's grpo reward functions checked in a child process, never in the caller's.

Checking a function means importing its module and calling it once on a sample completion
(rewards.check_user_functions): the module's own code runs. In the app that code would run
inside the UI process, where a module that calls sys.exit() at import (`unittest.__main__`)
ends the handler, and anything it prints or changes stays. So the Train tab's Plan asks

    python -m backend.training.reward_probe RESULT.json module:function ...

in the environment and folder a worker gets (repo on PYTHONPATH, the caller's folder), with a
time limit, and reads one JSON line back: null (every function imports and scores) or the
catalogued sentence of the first that does not. A fresh interpreter also imports the module as
it is on disk now, as the worker will at Start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from backend.config_policy import ConfigError
from backend.messages import Message, message_of, msg
from backend.runs.processes import repo_env
from backend.training.rewards import check_user_functions

MODULE = "backend.training.reward_probe"

# Importing a module that pulls torch in takes a few seconds on a busy CPU; one that waits longer
# waits for something (input, a server, a download) and is said so.
PROBE_TIMEOUT_S = 60.0
TAIL_CHARS = 300  # of the child's output, in the sentence when it ends without a result


def check_apart(refs: list[str], timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """check_user_functions for `refs` in a child process; ConfigError with its sentence, or one
    saying the check timed out or ended without a result."""
    if not refs:
        return
    shown = ", ".join(repr(ref) for ref in refs)
    with tempfile.TemporaryDirectory(prefix="reward-probe-") as folder:
        result, log = Path(folder) / "result.json", Path(folder) / "probe.log"
        argv = [sys.executable, "-m", MODULE, str(result), *refs]
        with open(log, "wb") as output:  # a file, not a pipe: a child that prints much never stalls
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                     env=repo_env(), start_new_session=True, close_fds=True)
            try:
                code = child.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)  # its own session: the child and what it started
                child.wait()
                raise ConfigError(msg("config.reward_probe_timeout", refs=shown, seconds=f"{timeout_s:g}")) from None
        if not result.is_file():
            tail = log.read_text(encoding="utf-8", errors="replace").strip()[-TAIL_CHARS:] or "no output"
            raise ConfigError(msg("config.reward_probe_ended", refs=shown, code=code, tail=tail,
                                  module=refs[0].partition(":")[0]))
        found = json.loads(result.read_text(encoding="utf-8"))
    if found is not None:
        raise ConfigError(Message.from_dict(found) or str(found))


def first_refusal(refs: list[str]) -> dict | None:
    """In the child: the Message (as a dict) of the first function that does not import and score, or None."""
    for ref in refs:
        try:
            check_user_functions(SimpleNamespace(reward_functions=[ref]))  # all it reads of the config
        except ConfigError as error:
            found = message_of(error)
            return found.to_dict() if found else msg("config.reward_call", ref=ref, error=str(error)).to_dict()
        except BaseException as error:  # noqa: BLE001 - the user's code ended the check (KeyboardInterrupt, exit)
            return msg("config.reward_call", ref=ref, error=f"{type(error).__name__}: {error}").to_dict()
    return None


def main(argv: list[str]) -> None:
    result, refs = Path(argv[0]), argv[1:]
    found = first_refusal(refs)
    result.write_text(json.dumps(found), encoding="utf-8")
    sys.stdout.flush()
    # Out at once: a thread or an atexit hook the user's module left must not hold the answer back.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
