"""Start-up path: the page is served before torch / transformers / peft are
imported, and the shell keeps working whatever tab modules exist."""

from __future__ import annotations

import re
import subprocess

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
def test_the_default_model_builds_once_the_page_answers_below_the_apps_priority(tmp_path):
    """A new workspace's background build (demo-tiny's demo model here) starts only after the page
    answers, at a lower CPU priority than the app: started before the UI was built, it took a core
    of two from the start-up."""
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
    finally:
        if build is not None:   # its own session: the app's end does not end it
            build.kill()
        app.stop()


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
