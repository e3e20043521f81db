"""Run the real app as a subprocess and drive it with Debian's chromium.

Used by the browser tests (tests/browser/) and by the API / security tests:
`AppProcess` launches `python app.py --port <free> --workspace <dir>`, waits
for the first HTTP 200, can be stopped and restarted on the same port and
workspace (to test that state survives a restart), and keeps the app's output
in a log file whose tail is shown when something fails.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def app_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1",
               GRADIO_ANALYTICS_ENABLED="False", PYTHONUNBUFFERED="1",
               FINETUNE_STUDIO_NO_DEMO_BUILD="1")  # tests link a cached demo model or build it themselves
    env.pop("GRADIO_TEMP_DIR", None)  # app.py puts uploads inside the workspace
    env.pop("FINETUNE_STUDIO_AUTH", None)
    return env


def http_status(url: str, timeout: float = 5.0) -> int | None:
    """The HTTP status of GET `url`, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, OSError):
        return None


class AppProcess:
    """`python app.py` on a free port with its own workspace, as a real process."""

    def __init__(self, workspace: Path, port: int | None = None, extra_args: list[str] | None = None,
                 env: dict[str, str] | None = None, log_path: Path | None = None,
                 python_args: list[str] | None = None):
        self.workspace = Path(workspace)
        self.port = port or free_port()
        self.extra_args = list(extra_args or [])
        self.env = env or app_env()
        self.log_path = log_path or (self.workspace.parent / f"app-{self.port}.log")
        self.python_args = list(python_args or [])  # e.g. ["-X", "importtime"]
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def command(self) -> list[str]:
        return [sys.executable, *self.python_args, str(REPO / "app.py"), "--port", str(self.port),
                "--workspace", str(self.workspace), "--recipe", "demo-tiny", *self.extra_args]

    def start(self, timeout: float = 90.0) -> AppProcess:
        """Launch and wait for the first HTTP 200 (raises with the log tail if it never comes)."""
        with open(self.log_path, "ab") as log:
            # A file, not a pipe: a pipe nobody reads would stall the app.
            self.process = subprocess.Popen(self.command(), cwd=REPO, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"app.py exited with {self.process.returncode}:\n{self.log_tail()}")
            if http_status(self.url, timeout=2) == 200:
                return
            time.sleep(0.2)
        raise TimeoutError(f"app.py did not answer {self.url} within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to the app's process group, SIGKILL after `grace` seconds."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(grace)

    def restart(self, timeout: float = 90.0, page=None) -> AppProcess:
        """Stop and start again on the same port and workspace, like a user re-running app.py.
        `page`, open on the app, leaves it first: left there, gradio's page reloads itself when the
        server comes back, and that reload interrupted the test's own navigation to the new app."""
        if page is not None:
            page.goto("about:blank")
        self.stop()
        deadline = time.monotonic() + 30
        while http_status(self.url, timeout=1) is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.start(timeout)

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def __enter__(self) -> AppProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def launch_browser(playwright):
    """Debian's chromium, headless (Playwright cannot download its own browser offline)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


# `make screenshots` sets it: only then do the docs' screenshots get rewritten (a test run leaves
# tracked files as they are).
DOC_SCREENSHOTS_ENV = "FINETUNE_STUDIO_DOC_SCREENSHOTS"
# Set (to anything) to keep each step's screenshot under test-artifacts/ in a plain test run. Off by default:
# a full page took chromium 3-5 s of the 2 cores, and a run of the suite took about 30 of them for pictures
# nobody looked at. A failing test's last page is kept either way (tests/browser/conftest.py).
STEP_SCREENSHOTS_ENV = "FINETUNE_STUDIO_STEP_SCREENSHOTS"


def screenshots_wanted() -> bool:
    return bool(os.environ.get(DOC_SCREENSHOTS_ENV) or os.environ.get(STEP_SCREENSHOTS_ENV))


def screenshot(page, name: str, also_to: Path | None = None) -> Path | None:
    """A full-page screenshot under test-artifacts/, when asked for (screenshots_wanted); `also_to` (a
    docs/ picture) gets a copy under `make screenshots` only."""
    if not screenshots_wanted():
        return None
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if also_to is not None and os.environ.get(DOC_SCREENSHOTS_ENV):
        also_to.parent.mkdir(parents=True, exist_ok=True)
        also_to.write_bytes(path.read_bytes())
    return path


def wait_app_loaded(page, timeout_ms: int = 60_000) -> None:
    """Wait until gradio has rendered the tabs and the page-load events have set the language.
    (Not "networkidle": gradio keeps a connection open, so the network never idles.)"""
    page.wait_for_selector("#shell-tabs", timeout=timeout_ms)
    page.wait_for_selector("#shell-language input:checked", state="attached", timeout=timeout_ms)
