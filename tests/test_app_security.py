"""Security defaults of a launched app.py (real process): loopback only unless
asked, login with --auth, an upload size limit, files served from the
workspace only, no monitoring / MCP endpoints."""

from __future__ import annotations

import http.cookiejar
import json
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from tests.browser.harness import REPO, AppProcess, app_env, free_port

USER, PASSWORD = "tester", "s3cret-pass"


def run_app(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "app.py"), *args], cwd=REPO, env=app_env(),
                          capture_output=True, text=True, timeout=60)


@pytest.mark.usefixtures("starts_processes")
@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "example.org"])
def test_non_loopback_bind_is_refused_without_the_flag(host, tmp_path):
    result = run_app("--host", host, "--port", str(free_port()), "--workspace", str(tmp_path / "ws"))
    assert result.returncode != 0
    assert f"Refusing to listen on {host}" in result.stderr and "--allow-remote" in result.stderr
    assert not (tmp_path / "ws").exists()  # refused before doing anything


@pytest.mark.usefixtures("starts_processes")
def test_malformed_auth_is_refused(tmp_path):
    result = run_app("--auth", "just-a-user", "--port", str(free_port()), "--workspace", str(tmp_path / "ws"))
    assert result.returncode == 2 and "USER:PASS" in result.stderr


@pytest.mark.usefixtures("starts_processes")
@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_a_port_out_of_range_is_a_sentence(port, tmp_path):
    result = run_app("--port", port, "--workspace", str(tmp_path / "ws"))
    assert result.returncode == 2, result.stderr
    assert f"--port {port} is not a port" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "ws").exists()


@pytest.fixture(scope="module")
def secured(tmp_path_factory, starts_processes):
    root = tmp_path_factory.mktemp("secured")
    (root / "outside.json").write_text('[{"instruction": "secret", "output": "do not serve"}]')
    app = AppProcess(root / "ws", extra_args=["--auth", f"{USER}:{PASSWORD}", "--max-file-size", "2kb"])
    app.start()
    yield app
    app.stop()


def opener(app: AppProcess | None = None, password: str | None = None):
    """A urllib opener with a cookie jar, logged in when `password` is given."""
    op = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    if password is not None:
        form = urllib.parse.urlencode({"username": USER, "password": password}).encode()
        op.open(app.url + "login", form, timeout=10)
    return op


def status(op, url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
    try:
        with op.open(urllib.request.Request(url, data, headers or {}), timeout=20) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def upload(op, app: AppProcess, size: int, headers: dict | None = None) -> tuple[int, bytes]:
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"data.json\"\r\n"
            "Content-Type: application/json\r\n\r\n").encode() + b"x" * size + f"\r\n--{boundary}--\r\n".encode()
    return status(op, app.url + "gradio_api/upload", body,
                  {"Content-Type": f"multipart/form-data; boundary={boundary}", **(headers or {})})


@pytest.mark.usefixtures("starts_processes")
def test_login_is_required(secured):
    anonymous = opener()
    assert status(anonymous, secured.url + "config")[0] == 401
    assert status(anonymous, secured.url + "gradio_api/info")[0] == 401
    with pytest.raises(urllib.error.HTTPError) as wrong:
        opener(secured, "wrong-password")
    assert wrong.value.code == 400
    assert status(opener(secured, PASSWORD), secured.url + "config")[0] == 200


def test_upload_over_the_limit_is_refused(secured):
    op = opener(secured, PASSWORD)
    assert upload(op, secured, 1000)[0] == 200
    code, body = upload(op, secured, 3000)
    assert code == 413, body


def test_files_outside_the_workspace_cannot_be_read(secured):
    op = opener(secured, PASSWORD)
    outside = secured.workspace.parent / "outside.json"
    for target in ("/etc/passwd", str(outside), f"{secured.workspace}/../outside.json"):
        code, body = status(op, secured.url + "gradio_api/file=" + target)
        assert code in (403, 404) and b"do not serve" not in body and b"root:" not in body
    # Control: a file inside the workspace is served to the signed-in user.
    inside = secured.workspace / "datasets" / "note.txt"
    inside.write_text("inside the workspace")
    assert status(op, secured.url + "gradio_api/file=" + str(inside)) == (200, b"inside the workspace")
    # An API call naming a server path as its "file" is refused too.
    payload = json.dumps({"data": [{"path": str(outside), "meta": {"_type": "gradio.FileData"}}, "", 256]}).encode()
    code, body = status(op, secured.url + "gradio_api/call/check_dataset", payload, {"Content-Type": "application/json"})
    assert code == 200
    event = json.loads(body)["event_id"]
    code, stream = status(op, secured.url + f"gradio_api/call/check_dataset/{event}")
    assert b"event: error" in stream and b"not uploaded by a user" in stream and b"secret" not in stream


def test_requests_under_another_host_name_are_refused(secured):
    """DNS rebinding: evil.example resolving to 127.0.0.1 still sends Host: evil.example."""
    op = opener(secured, PASSWORD)
    assert status(op, secured.url + "config")[0] == 200
    for host in (f"evil.example:{secured.port}", "evil.example", f"127.0.0.1.evil.example:{secured.port}"):
        code, body = status(op, secured.url + "config", headers={"Host": host})
        assert code == 400 and b"does not answer as" in body and b"--allow-remote" in body, (host, body)
        assert upload(op, secured, 10, headers={"Host": host})[0] == 400
    assert status(op, f"http://localhost:{secured.port}/config")[0] != 400   # 401: the cookie is 127.0.0.1's


def test_requests_sent_by_another_sites_page_are_refused(secured):
    """CSRF: a form on another site can POST here (a 'simple' request, no preflight); its Origin gives it away."""
    op = opener(secured, PASSWORD)
    assert upload(op, secured, 10, headers={"Origin": f"http://127.0.0.1:{secured.port}"})[0] == 200
    for origin in ("http://evil.example", "null", f"http://localhost:{secured.port + 1}"):
        code, body = upload(op, secured, 10, headers={"Origin": origin})
        assert code == 403 and b"another site" in body, (origin, body)
    form = urllib.parse.urlencode({"username": USER, "password": PASSWORD}).encode()
    assert status(opener(), secured.url + "login", form, {"Origin": "http://evil.example"})[0] == 403


def test_monitoring_and_mcp_are_off(secured):
    op = opener(secured, PASSWORD)
    assert status(op, secured.url + "monitoring")[0] in (403, 404)
    assert status(op, secured.url + "gradio_api/mcp/sse")[0] == 404
    config = json.loads(status(op, secured.url + "config")[1])
    assert config["analytics_enabled"] is False


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                                ("localhost", True), ("0.0.0.0", False), ("::", False),
                                                ("10.0.0.5", False)])
def test_loopback_detection(host, loopback):
    import app

    assert app.is_loopback(host) is loopback


def test_auth_from_the_environment_and_remote_with_the_flag(monkeypatch, capsys):
    import app

    monkeypatch.setenv(app.AUTH_ENV, "alice:wonder land")
    args = app.parse_args(["--host", "0.0.0.0", "--allow-remote"])
    assert app.check_args(args) == ("alice", "wonder land")
    args = app.parse_args(["--host", "0.0.0.0", "--allow-remote", "--share"])
    app.check_args(args)
    assert "public gradio.live address" in capsys.readouterr().err


@pytest.mark.parametrize("size", ["abc", "", "12", "1.5gb", "200 zb"])
def test_a_malformed_upload_limit_is_a_sentence(size, capsys):
    import app

    with pytest.raises(SystemExit) as refused:
        app.check_args(app.parse_args(["--max-file-size", size]))
    assert refused.value.code == 2
    assert f"--max-file-size {size!r} is not a size" in capsys.readouterr().err


@pytest.mark.parametrize("size", ["200mb", "2GB", "10 kb", "512b"])
def test_upload_limits_gradio_accepts_pass(size):
    from gradio.utils import _parse_file_size

    import app

    assert app.check_args(app.parse_args(["--max-file-size", size])) is None
    assert _parse_file_size(size) > 0
