"""The Serve panel's handlers on plain values, without a browser: start a real
server as a background job, read its URL and names, ask it through the
copied Python example's client, stop it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
import pytest

from tests.browser.harness import free_port
from tests.polling import wait_for
from tests.serve.support import NAMES, RUN_ID
from ui.panels import serve_panel


def servers_on(port: int) -> list[psutil.Process]:
    """`python -m backend.serve ... --port PORT` processes still alive (an orphan would be one)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        try:
            if "backend.serve" in cmdline and str(port) in cmdline and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.NoSuchProcess:
            pass
    return found


def test_examples_hold_the_url_and_model():
    curl, python = serve_panel.examples("http://127.0.0.1:8123/v1", "final")
    assert curl.startswith("curl http://127.0.0.1:8123/v1/chat/completions") and '"model": "final"' in curl
    assert 'base_url="http://127.0.0.1:8123/v1"' in python and 'model="final"' in python
    compile(python, "example.py", "exec")


def test_refusals_are_sentences(serve_workspace):
    assert "Pick a run" in serve_panel.start_server(serve_workspace, "en", None, 8000, "cpu")
    assert "not in this workspace" in serve_panel.start_server(serve_workspace, "en", "../../etc", 8000, "cpu")
    assert "1024 to 65535" in serve_panel.start_server(serve_workspace, "en", RUN_ID, 80, "cpu")
    assert serve_panel.stop_server(serve_workspace, "en") == "No server is running."
    runs, line, *_ = serve_panel.refresh(serve_workspace, "en", "deleted-run")
    assert runs["choices"] == [RUN_ID] and runs["value"] == RUN_ID and line.startswith("No server running")


@pytest.mark.usefixtures("starts_processes")
def test_start_shows_url_and_names_then_stop(serve_workspace):
    from backend.serve.server_job import status

    assert serve_panel.view(serve_workspace, "en")[1] == ""
    port = free_port()
    # Two Start clicks at the same instant (two browser tabs): one server starts, the other click is
    # refused, and serve.json names the one running, so Stop below stops it.
    together = threading.Barrier(2)

    def click(_) -> str:
        together.wait()
        return serve_panel.start_server(serve_workspace, "en", RUN_ID, port, "cpu")

    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(pool.map(click, range(2)))
    assert sorted("starting in the background" in a for a in answers) == [False, True], answers
    assert any("already" in a for a in answers), answers
    assert "already" in serve_panel.start_server(serve_workspace, "en", RUN_ID, port, "cpu")
    try:
        line, url, curl, python = wait_for(lambda: (v := serve_panel.view(serve_workspace, "en"))[1] and v,
                                           "the panel's server to serve")
        assert url == f"http://127.0.0.1:{port}/v1"
        assert all(name in line for name in NAMES) and url in curl and url in python
        answer = httpx.post(f"{url}/chat/completions", timeout=120, json={
            "model": "final", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 4})
        assert answer.status_code == 200 and answer.json()["model"] == "final"
    finally:
        stopped = serve_panel.stop_server(serve_workspace, "en")
    assert stopped == "The server is stopped."
    assert status(serve_workspace)["state"] == "completed"
    assert serve_panel.view(serve_workspace, "en") == ("The server is stopped.", "", "", "")
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health")
    assert wait_for(lambda: not servers_on(port), "no server left on the port") is True
