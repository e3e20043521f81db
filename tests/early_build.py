"""Build the cached demo model in the background while the tests that do not
need it run (a fresh clone has no cache: the build is about a minute of one
core, and most of the suite's unit tests leave the other core idle).

The build is the ordinary `ensure_demo_model` in a child process, under the
same file lock as the `demo_model_dir` fixture: the fixture's own call waits
for the child's build and finds it current, or builds it itself if the child
failed, so a failed background build costs time, never a result. The tests
that need the demo model run after the others, in their usual order (the
same order with or without a cache, so a cached run orders tests like CI).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

FIXTURE = "demo_model_dir"


def needs_demo_model(item) -> bool:
    return FIXTURE in getattr(item, "fixturenames", ())


def demo_last(items: list) -> None:
    """Stable in-place sort: the tests without the demo model first, then the others, each
    group in collection order. (A file with both kinds runs in two parts; its module fixtures
    are cheap: a tokenizer load, a file check.)"""
    items.sort(key=needs_demo_model)


def start(cache: Path, repo: Path, env: dict) -> subprocess.Popen | None:
    """Start building cache/demo in a child process (its output in cache/demo-build.log);
    None when the build is current already."""
    from backend.models.loading import demo_model_ready

    if demo_model_ready(cache):
        return None
    cache.mkdir(parents=True, exist_ok=True)
    code = "import sys; from pathlib import Path; from backend.models.loading import ensure_demo_model; " \
           "ensure_demo_model(Path(sys.argv[1]))"
    with open(cache / "demo-build.log", "ab") as log:  # a file, not a pipe nobody reads
        return subprocess.Popen([sys.executable, "-c", code, str(cache)], cwd=repo, env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen | None) -> None:
    """At the session's end: a build still going (only a part of the suite ran, or it was
    interrupted) gets SIGINT, so ensure_demo_model removes its half-built staging folder."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
