"""Start-up time: `python app.py` to the first HTTP 200, against `python -c "import gradio"`.

The app starts as a user starts it: a new workspace, so its background build
of the default model starts too (it competes for the cores), and, to tell
that part apart, once more with --no-demo-build. All three are measured in
the same run, in a rotating order, each in a fresh process, so all see the
same machine load; after each app run the background build it started is
killed, so none piles up. Goal: the app's median under 1.5x the median of
importing gradio alone.

    .venv/bin/python bench/bench_startup.py [--repeat 7] [--write docs/BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.browser.harness import app_env, free_port, http_status  # noqa: E402

SECTION = "## Start-up"


def time_import_gradio() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import gradio"], env=app_env(), check=True)
    return time.perf_counter() - start


def time_app_first_200(workspace: Path, demo_build: bool = True, repo: Path = REPO) -> float:
    """`python app.py --workspace NEW` of `repo` to the first 200 on `/`; `demo_build` False adds --no-demo-build."""
    env = app_env()
    env.pop("FINETUNE_STUDIO_NO_DEMO_BUILD")   # the tests' setting: a user's start builds the default model
    env["PYTHONPATH"] = str(repo)
    flags = [] if demo_build else ["--no-demo-build"]
    port = free_port()
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, str(repo / "app.py"), "--port", str(port), "--workspace", str(workspace),
                                *flags], cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        while http_status(f"http://127.0.0.1:{port}/", timeout=1) != 200:
            if process.poll() is not None:
                raise RuntimeError(f"app.py exited with {process.returncode}")
            time.sleep(0.02)
        return time.perf_counter() - start
    finally:
        process.terminate()
        process.wait(30)
        kill_builds(workspace)


def kill_builds(workspace: Path) -> None:
    """The background build of `workspace`'s default model: detached, so app.py's end leaves it running."""
    models = str(workspace / "models")   # its --models argument
    for other in psutil.process_iter(["cmdline"]):
        if models in (other.info["cmdline"] or ()):
            with contextlib.suppress(psutil.NoSuchProcess):
                other.kill()


KINDS = ("gradio", "app", "app_no_build")


def measure(repeat: int, before: Path | None = None) -> dict[str, list[float]]:
    """Seconds of each kind; with `before` (another checkout), its app.py too, as a user starts it."""
    kinds = KINDS + (("before",) if before else ())
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        time_import_gradio()  # warm the file cache once for all, not timed
        for i in range(repeat):
            turn = i % len(kinds)
            for kind in kinds[turn:] + kinds[:turn]:      # each kind first, second, ... in turn
                workspace = Path(tmp) / f"{kind}-{i}"     # a fresh workspace each time: a first launch
                if kind == "gradio":
                    times[kind].append(time_import_gradio())
                else:
                    times[kind].append(time_app_first_200(workspace, demo_build=kind != "app_no_build",
                                                          repo=before if kind == "before" else REPO))
    return times


def section(times: dict[str, list[float]], command: str, before_label: str = "") -> str:
    gradio, app, bare = (statistics.median(times[kind]) for kind in KINDS)
    ratio, bare_ratio = app / gradio, bare / gradio
    load = os.getloadavg()[0]
    before = ""
    if "before" in times:
        median = statistics.median(times["before"])
        before = (f"\nBefore ({before_label}), in the same run: `app.py` median {median:.2f} s, ratio "
                  f"**{median / gradio:.2f}x**; runs {', '.join(f'{t:.2f}' for t in times['before'])}.\n")
    return f"""{SECTION}

What: wall time from starting `python app.py --port P --workspace NEW_DIR` to
the first HTTP 200 on `/` (polled every 20 ms), as a user starts it (the
background build of the default model starts too; killed after each run),
against `python -c "import gradio"` on the same machine, and the app once
more with `--no-demo-build`, all in fresh processes, in a rotating order, in
one run. The app's start-up path imports gradio, the shell, every tab module and
the backend modules they need, but not torch / transformers / peft: those
load in the background once a browser opens the page (`ui/warmup.py`), or
on the first action that needs them (checked by
`tests/test_app_startup.py` with `python -X importtime`). The background
build starts once the page answers, below the app's CPU priority (nice +10;
checked by the same test file).

Command (repo root):

```
{command}
```

| runs | `import gradio` median | `app.py` to first 200 median | ratio | goal | with `--no-demo-build` | ratio |
|---|---|---|---|---|---|---|
| {len(times['app'])} | {gradio:.2f} s | {app:.2f} s | **{ratio:.2f}x** | < 1.5x | {bare:.2f} s | {bare_ratio:.2f}x |
{before}
All runs (s): import gradio {', '.join(f'{t:.2f}' for t in times['gradio'])}; app.py {', '.join(f'{t:.2f}' for t in times['app'])}; app.py --no-demo-build {', '.join(f'{t:.2f}' for t in times['app_no_build'])}.
Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs shared with other jobs
(1-minute load average at the end: {load:.1f}), Python {platform.python_version()}.
"""


def write_section(path: Path, text: str) -> None:
    """Replace the `## Start-up` section of `path` (or append it), leaving the others alone."""
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    lines = old.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == SECTION), None)
    if start is None:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        new = "".join(lines[:start]) + text + ("\n" if end < len(lines) else "") + "".join(lines[end:])
    path.write_text(new, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--write", type=Path, help="update the Start-up section of this markdown file")
    parser.add_argument("--before", type=Path, help="another checkout (git archive COMMIT | tar -x -C DIR) whose "
                                                    "app.py is measured in the same run, to compare")
    parser.add_argument("--before-label", default="", help="what --before holds, for the text (e.g. its commit)")
    args = parser.parse_args()
    times = measure(args.repeat, args.before)
    before = f" --before DIR --before-label '{args.before_label}'" if args.before else ""
    command = f".venv/bin/python bench/bench_startup.py --repeat {args.repeat}{before} --write docs/BENCHMARKS.md"
    text = section(times, command, args.before_label or str(args.before))
    print(text)
    if args.write:
        write_section(args.write, text)


if __name__ == "__main__":
    main()
