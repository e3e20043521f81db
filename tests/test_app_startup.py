"""Start-up path: the page is served before torch / transformers / peft are
imported, and the shell keeps working whatever tab modules exist."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys

import psutil
import pytest

from tests.browser.harness import REPO, AppProcess, app_env, http_status
from tests.polling import wait_for

HEAVY = ("torch", "transformers", "peft", "accelerate", "bitsandbytes", "datasets", "openai")


@pytest.mark.usefixtures("starts_processes")
def test_launched_app_serves_the_page_before_importing_torch(tmp_path):
    # -X importtime logs every import as it happens: what is in the log when the
    # page answers 200 is exactly what the start-up path imported.
    app = AppProcess(tmp_path / "ws", python_args=["-X", "importtime"])
    with app:
        assert http_status(app.url) == 200
        log = app.log_tail(chars=10_000_000)
        imported = set(re.findall(r"\|\s+(\w+)(?:\.\w+)*\s*$", log, flags=re.M))
        assert {"gradio", "ui", "backend"} <= imported  # the log really holds the import trace
        # The tabs were built (importlib's own imports are not traced; what they import is).
        assert re.search(r"\|\s+ui\.data_session\s*$", log, flags=re.M)
        assert not imported & set(HEAVY), f"imported before the first request: {sorted(imported & set(HEAVY))}"


@pytest.mark.usefixtures("starts_processes")
def test_the_default_model_builds_once_the_page_answers_below_the_apps_priority_and_ends_with_the_app(tmp_path):
    """A new workspace's background build (demo-tiny's demo model here) starts only after the page
    answers, at a lower CPU priority than the app: started before the UI was built, it took a core
    of two from the start-up. Closing the app ends it (it has a session of its own, so the app's
    signal never reaches it: it went on for minutes)."""
    env = app_env()
    env.pop("FINETUNE_STUDIO_NO_DEMO_BUILD")
    app = AppProcess(tmp_path / "ws", env=env)
    with open(app.log_path, "ab") as log:   # not app.start(): that waits for the page first
        app.process = subprocess.Popen(app.command(), cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
    ui = psutil.Process(app.process.pid)

    def the_build():
        assert app.process.poll() is None, app.log_tail()
        return next((c for c in ui.children() if "backend.training.model_stage" in c.cmdline()), None)

    build = None
    try:
        build = wait_for(the_build, "the background build", every_s=0.02)
        assert http_status(app.url) == 200, "the build started before the page answered"
        assert build.nice() > ui.nice()
        app.stop()
        wait_for(lambda: _gone(build), "the background build to end with the app")
        build_log = (tmp_path / "ws" / "models" / ".model-build.log").read_text()
        assert f"background build stopped: the app that started it (pid {ui.pid}) has ended" in build_log
        assert not list((tmp_path / "ws" / "models").glob(".demo-build-*"))  # its staging folder removed
    finally:
        if build is not None and not _gone(build):
            build.kill()
        app.stop()


@pytest.mark.usefixtures("starts_processes")
def test_the_background_build_ends_when_its_workspace_is_removed(tmp_path):
    from backend.training.model_stage import start_background_build

    models = tmp_path / "ws" / "models"
    process = start_background_build(models, "demo")  # owned by this test process, which stays
    try:
        wait_for(lambda: (models / ".model-build.log").stat().st_size or process.poll() is not None,
                 "the build's first line")
        log = (models / ".model-build.log").open()  # kept open: the file goes with its folder
        shutil.rmtree(tmp_path / "ws")
        assert process.wait(timeout=120) is not None
        assert f"background build stopped: its models folder {models} was removed" in log.read()
    finally:
        if process.poll() is None:
            process.kill()


def _gone(process: psutil.Process) -> bool:
    """Ended (a zombie nobody reaps counts: the test's container may lack an init that reaps)."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_settings_round_trip(tmp_path):
    from backend.runs.workspace import Workspace
    from ui.settings import load_settings, save_settings

    ws = Workspace(tmp_path / "ws")
    assert load_settings(ws) == {}
    save_settings(ws, language="zh", dataset="mine", data={"model": "demo", "cutoff": 512})
    save_settings(ws, dataset=None, run_id="r1")
    assert load_settings(ws) == {"language": "zh", "run_id": "r1", "data": {"model": "demo", "cutoff": 512}}
    ws.settings_file.write_text("{not json")
    assert load_settings(ws) == {}  # a broken file never stops the app


class SlowPage:
    """ASGI middleware: every request waits `delay_s` first, as the page's first answer does on a loaded machine."""

    def __init__(self, app, delay_s: float):
        self.app, self.delay_s = app, delay_s

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            await asyncio.sleep(self.delay_s)
        await self.app(scope, receive, send)


def _tiny_blocks():
    import gradio as gr

    with gr.Blocks() as demo:
        gr.Markdown("hello")
    return demo


# The launches below run in a child interpreter: a gradio server launched inside pytest's process, beside the
# whole suite's collected modules, closed pytest's captured stderr ("I/O operation on closed file").
LAUNCH_CHILD = """
import sys
from starlette.middleware import Middleware
import app
from tests.browser.harness import free_port, http_status
from tests.test_app_startup import SlowPage, _tiny_blocks

slow = [Middleware(SlowPage, delay_s=4)]
if sys.argv[1] == "slow-page":
    gradios = _tiny_blocks()
    try:
        gradios.launch(server_port=free_port(), app_kwargs={"middleware": slow}, prevent_thread_lock=True, quiet=True)
        print("gradio: started")
    except ValueError as error:
        print("gradio:", error)
    finally:
        gradios.close()
    demo = _tiny_blocks()
    url = app.serve(demo, "127.0.0.1", free_port(), slow, {"quiet": True})
    print("serve:", http_status(url, timeout=30))
    demo.close()
else:
    port = free_port()
    print("port:", port, flush=True)
    try:
        app.serve(_tiny_blocks(), "127.0.0.1", port, slow, {"quiet": True}, answer_within_s=1)
    except SystemExit as ended:
        print("exit:", ended.code, "then:", http_status(f"http://127.0.0.1:{port}/", timeout=2), flush=True)
        raise
"""


def _launch_child(case: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", LAUNCH_CHILD, case], cwd=REPO, env=app_env(), capture_output=True,
                          text=True, timeout=300)


@pytest.mark.usefixtures("starts_processes")
def test_a_page_slower_than_gradios_3_s_check_still_starts_the_app():
    """gradio's launch gives the page one HEAD of 3 s, then refuses to start ("a shareable link must be
    created"): on a machine at load 19-25 that ended every start. app.serve waits for the page itself."""
    child = _launch_child("slow-page")
    assert child.returncode == 0, child.stderr[-3000:]
    assert "shareable link must be created" in child.stdout  # the trap, as it was
    assert "serve: 200" in child.stdout, child.stdout


@pytest.mark.usefixtures("starts_processes")
def test_a_page_that_never_answers_ends_the_start_with_a_sentence():
    child = _launch_child("never")
    port = re.search(r"port: (\d+)", child.stdout).group(1)
    assert child.returncode == 1, child.stderr[-3000:]
    said = child.stderr
    assert f"error: The app started, but its page http://127.0.0.1:{port}/ did not answer within 1 s" in said
    assert "ReadTimeout" in said and "--port" in said
    assert "exit: 1 then: None" in child.stdout  # closed, not left serving


@pytest.mark.usefixtures("starts_processes")
def test_the_app_starts_beside_a_cpu_hog(tmp_path):
    """Busy-loop processes at the app's own priority (niced like the app, so other work on the machine
    keeps its share), one per core and one more, for as long as the start takes (bounded)."""
    hog = "import time\nend = time.monotonic() + 180\nwhile time.monotonic() < end: pass"
    niceness = ["nice", "-n", "10"]
    hogs = [subprocess.Popen([*niceness, sys.executable, "-c", hog]) for _ in range((os.cpu_count() or 2) + 1)]
    app = AppProcess(tmp_path / "ws")
    try:
        with open(app.log_path, "ab") as log:
            app.process = subprocess.Popen([*niceness, *app.command()], cwd=REPO, env=app.env, stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True)
        app.wait_ready(timeout=300)
        assert "shareable link" not in app.log_tail()
    finally:
        for process in hogs:
            process.kill()
            process.wait()
        app.stop()
