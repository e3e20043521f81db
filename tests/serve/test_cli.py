"""python -m backend.serve refusals (exit 2, one sentence, before any model
loads), the vLLM command it builds, and the pieces the server is made of
(stop strings, context fitting) on plain values."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from backend.serve.bridge import StopStrings
from backend.serve.cli import main
from backend.serve.job import fit_context
from backend.serve.protocol import ApiError
from tests.serve.support import RUN_ID


@pytest.fixture
def run_dir(serve_workspace):
    return str(serve_workspace.runs_dir / RUN_ID)


@pytest.mark.parametrize("extra, expected", [
    (["--host", "0.0.0.0"], "--allow-remote"),
    (["--host", "192.168.1.20", "--allow-remote"], "needs an API key"),
    (["--api-key", " "], "--api-key is empty"),
    (["--checkpoint", "checkpoint-99"], "checkpoint-8, checkpoint-16, final"),
    (["--port", "70000"], "not a port"),
    (["--api-key", "clé-secrète"], "printable ASCII"),
    (["--api-key", "key\twith-tab"], "printable ASCII"),
    (["--max-queue", "0"], "would refuse every request"),
    (["--max-adapters", "0"], "--max-adapters 0 must be 1 or more"),
    (["--host", "0.0.0.0", "--allow-remote", "studio.lan"], "needs an API key"),
    (["--device", "gpu"], "not a device"),
    (["--model", "/no/such/model"], "not a model folder"),
])
def test_refused_settings_exit_2_with_a_sentence(run_dir, capsys, extra, expected):
    assert main(["--run", run_dir, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err and "Traceback" not in err


def test_missing_run_and_taken_port_are_refused(run_dir, tmp_path, capsys):
    assert main(["--run", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["--run", str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert main(["--run", run_dir, "--port", str(taken.getsockname()[1])]) == 2
    assert "choose another --port" in capsys.readouterr().err


def test_vllm_command_serves_the_same_names(run_dir, serve_workspace):
    from backend.models.loading import resolve_model_path
    from backend.serve.names import ServedModels
    from backend.serve.vllm import vllm_command

    served = ServedModels(run_dir, lambda name: resolve_model_path(name, serve_workspace.models_dir))
    command = vllm_command(served.refresh(), "127.0.0.1", 8001)
    assert command[:3] == ["vllm", "serve", str(serve_workspace.models_dir / "demo")]
    assert command[command.index("--served-model-name") + 1] == "base"
    assert "--enable-lora" in command and command[command.index("--max-lora-rank") + 1] == "8"
    modules = command[command.index("--lora-modules") + 1:]
    assert modules == [f"{name}={run_dir}/{name}" for name in ("checkpoint-8", "checkpoint-16", "final")]


def test_stop_strings_cut_and_hold_back_a_partial_match():
    cancel = threading.Event()
    stops = StopStrings(("END",), cancel)
    sent = [stops.feed(text) for text in ("Hel", "Hello E", "Hello EN", "Hello ENDING")]
    assert "".join(sent) + stops.flush() == "Hello "
    assert sent[:3] == ["H", "ello", " "]   # the last len("END") - 1 characters wait: they may start END
    assert stops.hit and cancel.is_set()
    plain = StopStrings((), threading.Event())
    assert [plain.feed(t) for t in ("a", "ab")] == ["a", "b"] and not plain.hit


def test_fit_context_says_the_numbers():
    assert fit_context(10, None, 512, "chat") == 256
    assert fit_context(500, None, 512, "chat") == 12
    assert fit_context(10, 502, 512, "chat") == 502
    with pytest.raises(ApiError) as error:
        fit_context(10, 503, 512, "completion")
    assert error.value.status == 400 and "513 tokens (10 in the prompt, 503 for max_tokens)" in error.value.message
    with pytest.raises(ApiError, match="maximum context length is 512 tokens"):
        fit_context(512, None, 512, "chat")


def test_names_a_server_answers_as():
    from backend.serve.hosts import allowed_hosts, host_allowed

    local = allowed_hosts("127.0.0.1")
    assert all(host_allowed(h, local) for h in ("127.0.0.1:8000", "localhost", "[::1]:8000", "LocalHost:1"))
    assert not any(host_allowed(h, local) for h in ("evil.example", "", "127.0.0.1.nip.io:8000", "[::1"))
    named = allowed_hosts("192.168.1.20", ["studio.lan"])
    assert host_allowed("192.168.1.20:8000", named) and host_allowed("Studio.LAN:8000", named)
    everywhere = allowed_hosts("0.0.0.0")
    assert "127.0.0.1" in everywhere and "0.0.0.0" not in everywhere
    assert socket.gethostname().lower() in everywhere
    assert host_allowed("abc.gradio.live", local, share=True) and not host_allowed("abc.gradio.live", local)


def test_host_and_origin_are_parsed_strictly():
    """host[:port] only: a user part, a port that is not 1-65535 or any other character is not a host,
    and an Origin is http or https with a host and port, nothing else."""
    from backend.serve.hosts import parse_host, parse_origin

    assert parse_host("localhost:7860") == ("localhost", 7860) and parse_host("127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert parse_host("[::1]:8000") == ("::1", 8000) and parse_host("Studio.LAN") == ("studio.lan", None)
    assert parse_host("abc.gradio.live") == ("abc.gradio.live", None)
    bad = ("evil.com@localhost:8000", "localhost:abc", "localhost:99999", "localhost:0", "localhost:", "[::1",
           "::1:8000", "localhost:8000/x", "local host", "localhost:8000 8000", "-x.lan", "a..b", "999.1.1.1",
           "127.0.0.1.:80", "[127.0.0.1]:80", "localhost:+80", "localhost\n", "localhost:８０", "")
    assert [h for h in bad if parse_host(h) is not None] == []
    assert parse_origin("http://127.0.0.1:8000") == ("http", "127.0.0.1", 8000)
    assert parse_origin("https://[::1]:8000") == ("https", "::1", 8000)
    for origin in ("file://127.0.0.1:8000", "null", "ftp://localhost:8000", "http://evil.com@localhost:8000",
                   "http://localhost:8000/", "http://[::1", "//localhost:8000", "localhost:8000"):
        assert parse_origin(origin) is None, origin


def test_the_host_check_of_the_app_and_the_server_refuses_what_the_strict_parse_refuses():
    """HostCheck is both's guard (app.py's host_guard, the server's app): urlsplit read
    'evil.com@localhost:P' as localhost, let 'localhost:abc' and 'localhost:99999' through and
    took a file:// page at this address for this server's own."""
    from backend.serve.hosts import HostCheck, allowed_hosts

    check = HostCheck(None, allowed_hosts("127.0.0.1"), refuse=None)
    assert check.problem({b"host": b"127.0.0.1:8000", b"origin": b"http://127.0.0.1:8000"}) is None
    assert check.problem({b"host": b"[::1]:8000"}) is None and check.problem({b"host": b"localhost"}) is None
    for host in (b"evil.com@localhost:8000", b"localhost:abc", b"localhost:99999"):
        assert check.problem({b"host": host}) == (400, "host", host.decode()), host
    assert check.problem({b"host": b"127.0.0.1:8000", b"origin": b"file://127.0.0.1:8000"})[0] == 403


def test_a_base_model_that_cannot_load_is_refused_with_a_sentence(run_dir, tmp_path, capsys):
    """A folder given as --model passes the argument checks but holds no model: the server
    closes its socket and refuses, like its arguments (exit 2, one sentence, the progress file)."""
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    progress = tmp_path / "progress.json"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["--run", run_dir, "--model", str(empty), "--port", str(port), "--progress", str(progress)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Cannot load the models: ") and str(empty) in err and "Traceback" not in err
    assert json.loads(progress.read_text())["state"] == "failed"
    with socket.socket() as again:   # the port is free again: the socket was closed
        again.bind(("127.0.0.1", port))
