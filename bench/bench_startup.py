"""Start-up time: `python app.py` to the first HTTP 200, against `python -c "import gradio"`.

Both are measured in the same run, alternating, each in a fresh process, so
both see the same machine load. Goal (issue 4): the app's median under 1.5x
the median of importing gradio alone.

    .venv/bin/python bench/bench_startup.py [--repeat 7] [--write docs/BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.browser.harness import app_env, free_port, http_status  # noqa: E402

SECTION = "## Start-up"


def time_import_gradio() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import gradio"], env=app_env(), check=True)
    return time.perf_counter() - start


def time_app_first_200(workspace: Path) -> float:
    port = free_port()
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, str(REPO / "app.py"), "--port", str(port), "--workspace", str(workspace)],
                               cwd=REPO, env=app_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
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


def measure(repeat: int) -> tuple[list[float], list[float]]:
    app_times, gradio_times = [], []
    with tempfile.TemporaryDirectory() as tmp:
        time_import_gradio()  # warm the file cache once for both, not timed
        for i in range(repeat):
            workspace = Path(tmp) / f"ws{i}"  # a fresh workspace each time: a first launch
            if i % 2:
                app_times.append(time_app_first_200(workspace))
                gradio_times.append(time_import_gradio())
            else:
                gradio_times.append(time_import_gradio())
                app_times.append(time_app_first_200(workspace))
    return app_times, gradio_times


def section(app_times: list[float], gradio_times: list[float], command: str) -> str:
    app, gradio = statistics.median(app_times), statistics.median(gradio_times)
    ratio = app / gradio
    load = os.getloadavg()[0]
    return f"""{SECTION}

What: wall time from starting `python app.py --port P --workspace NEW_DIR` to
the first HTTP 200 on `/` (polled every 20 ms), against `python -c "import
gradio"` on the same machine, both in fresh processes, alternating, in one
run. The app's start-up path imports gradio, the shell, every tab module and
the backend modules they need, but not torch / transformers / peft: those
load on the first action that needs them (checked by
`tests/test_app_startup.py` with `python -X importtime`).

Command (repo root):

```
{command}
```

| runs | `import gradio` median | `app.py` to first 200 median | ratio | goal |
|---|---|---|---|---|
| {len(app_times)} | {gradio:.2f} s | {app:.2f} s | **{ratio:.2f}x** | < 1.5x |

All runs (s): import gradio {', '.join(f'{t:.2f}' for t in gradio_times)}; app.py {', '.join(f'{t:.2f}' for t in app_times)}.
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
    args = parser.parse_args()
    app_times, gradio_times = measure(args.repeat)
    command = f"nice -n 10 .venv/bin/python bench/bench_startup.py --repeat {args.repeat} --write docs/BENCHMARKS.md"
    text = section(app_times, gradio_times, command)
    print(text)
    if args.write:
        write_section(args.write, text)


if __name__ == "__main__":
    main()
