"""A word when a run ends (backend/runs/notify.py): the run's summary POSTed to its workspace's
webhook, a real HTTP server on 127.0.0.1 here. In-process: `deliver` is what the detached sender
the worker and the store start does; the slow tests let the real worker, the queue and the store
start that sender themselves."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

from backend.config_recipes import tiny_config
from backend.runs.files import read_status, update_status
from backend.runs.notify import (
    NOTIFY_LOG,
    announce_end,
    check_webhook_url,
    deliver,
    send_test,
    webhook_url,
)
from backend.runs.workspace import Workspace
from tests.polling import wait_for
from tests.webhook_server import WebhookServer

QUICK = {"pauses_s": (0.01, 0.01), "timeout_s": 5}  # the retries' pauses shortened; the same code path


def set_webhook(workspace: Workspace, url: str) -> None:
    workspace.settings_file.write_text(json.dumps({"language": "en", "webhook_url": url}))


def ended_run(workspace: Workspace, run_id: str = "20250101-120000-demo", state: str = "completed") -> Path:
    """A run folder as the worker leaves it at its end: config.yaml, status.json, summary.json."""
    run_dir = workspace.runs_dir / run_id
    run_dir.mkdir(parents=True)
    tiny_config(max_steps=40).save(run_dir / "config.yaml")
    update_status(run_dir, state=state, run_id=run_id, model="demo", method="lora", global_step=40, max_steps=40,
                  started_at=time.time() - 60, ended_at=time.time(), exit_code=0, pid=12345, command=["python"])
    (run_dir / "summary.json").write_text(json.dumps({"global_step": 40, "wall_time_s": 58.0, "best_checkpoint": None}))
    return run_dir


def dead_port() -> int:
    """A port nobody listens on: bound, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_completed_run_posts_its_summary_once_with_slack_and_discord_keys(tmp_path):
    workspace = Workspace(tmp_path / "ws").ensure()
    run_dir = ended_run(workspace)
    with WebhookServer() as server:
        set_webhook(workspace, server.url)
        delivery = deliver(run_dir, **QUICK)
        assert deliver(run_dir, **QUICK) is None  # this end is claimed: a second announcement posts nothing
    assert delivery.ok and delivery.tries == 1 and delivery.code == 200
    [post] = server.posts
    body = post["body"]
    assert post["path"] == "/hook" and post["headers"]["Content-Type"].startswith("application/json")
    assert body["text"] == body["content"] == "FineTune Studio: run 20250101-120000-demo completed at step 40/40 (sft, demo)."
    assert (body["event"], body["run_id"], body["state"], body["stage"]) == ("run_end", run_dir.name, "completed", "sft")
    assert body["status"]["global_step"] == 40 and body["status"]["model"] == "demo" and "pid" not in body["status"]
    assert body["summary"] == {"global_step": 40, "wall_time_s": 58.0, "best_checkpoint": None}
    notified = read_status(run_dir)["notified"]
    assert (notified["ok"], notified["tries"], notified["code"]) == (True, 1, 200)
    log = (run_dir / NOTIFY_LOG).read_text()
    assert "try 1 of 3: HTTP 200" in log and "sent after 1 tries" in log
    assert server.url not in log and server.url not in json.dumps(read_status(run_dir))  # the URL is a secret


def test_a_server_answering_500_twice_is_tried_again_and_the_third_try_arrives(tmp_path):
    workspace = Workspace(tmp_path / "ws").ensure()
    run_dir = ended_run(workspace, state="failed")
    update_status(run_dir, error="The dataset file is missing.")
    with WebhookServer(answers=[500, 500, 200]) as server:
        set_webhook(workspace, server.url)
        delivery = deliver(run_dir, **QUICK)
    assert (delivery.ok, delivery.tries, delivery.code) == (True, 3, 200)
    assert len(server.posts) == 3 and all(p["body"]["state"] == "failed" for p in server.posts)
    assert server.posts[0]["body"]["text"].endswith("The dataset file is missing.")
    log = (run_dir / NOTIFY_LOG).read_text()
    assert log.count("HTTP 500") == 2 and "try 3 of 3: HTTP 200" in log


def test_a_dead_webhook_is_logged_with_its_reason_and_leaves_the_run_as_it_was(tmp_path):
    workspace = Workspace(tmp_path / "ws").ensure()
    run_dir = ended_run(workspace, state="stopped")
    set_webhook(workspace, f"http://127.0.0.1:{dead_port()}/hook")
    before = read_status(run_dir)
    delivery = deliver(run_dir, **QUICK)
    after = read_status(run_dir)
    assert not delivery.ok and delivery.tries == 3 and delivery.code is None and "refused" in delivery.reason.lower()
    assert {k: v for k, v in after.items() if k not in ("notified", "updated_at")} == \
        {k: v for k, v in before.items() if k != "updated_at"}
    assert after["notified"]["ok"] is False and "refused" in after["notified"]["reason"].lower()
    log = (run_dir / NOTIFY_LOG).read_text()
    assert log.count("try ") == 3 and "not sent after 3 tries" in log and "refused" in log.lower()


def test_a_client_error_is_not_tried_again(tmp_path):
    workspace = Workspace(tmp_path / "ws").ensure()
    run_dir = ended_run(workspace)
    with WebhookServer(answers=[404]) as server:
        set_webhook(workspace, server.url)
        delivery = deliver(run_dir, **QUICK)
    assert (delivery.ok, delivery.tries, delivery.code, len(server.posts)) == (False, 1, 404, 1)


def test_a_run_posts_to_its_own_workspace_only(tmp_path):
    a, b = (Workspace(tmp_path / name).ensure() for name in ("a", "b"))
    run_in_a = ended_run(a)
    with WebhookServer() as server_a, WebhookServer() as server_b:
        set_webhook(a, server_a.url)
        set_webhook(b, server_b.url)
        assert deliver(run_in_a, **QUICK).ok
        assert deliver(ended_run(Workspace(tmp_path / "c").ensure()), **QUICK) is None  # c has no webhook
    assert [p["body"]["run_id"] for p in server_a.posts] == [run_in_a.name] and server_b.posts == []


def test_bad_urls_are_refused_with_a_sentence_and_never_used(tmp_path):
    for url, message_id in (("ftp://x", "notify.url_scheme"), ("not a url", "notify.url_scheme"),
                            ("file:///etc/passwd", "notify.url_scheme"), ("http://", "notify.url_host"),
                            ("https://exa mple.com/x", "notify.url_host")):
        refusal = check_webhook_url(url)
        assert refusal is not None and refusal.id == message_id, url
        assert repr(url) in str(refusal) and "https://ntfy.sh/your-topic" in str(refusal)
    assert check_webhook_url("") is None and check_webhook_url("https://ntfy.sh/my-runs") is None
    workspace = Workspace(tmp_path / "ws").ensure()
    set_webhook(workspace, "ftp://x")  # written by hand: the sender reads it as no webhook
    assert webhook_url(workspace.root) is None and deliver(ended_run(workspace)) is None
    workspace.settings_file.write_bytes(b"\xff\xfe not json")
    assert webhook_url(workspace.root) is None


def test_announce_starts_nothing_without_a_webhook_an_end_or_a_workspace_run(tmp_path):
    """In-process: each of these returns before starting the sender (a process would fail this fast test)."""
    workspace = Workspace(tmp_path / "ws").ensure()
    assert announce_end(ended_run(workspace)) is False  # no webhook
    set_webhook(workspace, "http://127.0.0.1:9/hook")
    running = ended_run(workspace, run_id="20250101-130000-live", state="running")
    assert announce_end(running) is False
    probe = workspace.root / "speed" / "probes" / "ab12"  # the speed probe's scratch run: not a run of the workspace
    probe.mkdir(parents=True)
    update_status(probe, state="completed", ended_at=time.time())
    assert announce_end(probe) is False


def test_send_a_test_reaches_the_server(tmp_path):
    with WebhookServer() as server:
        delivery = send_test(server.url, tmp_path / "my-ws", **QUICK)
    assert delivery.ok and server.posts[0]["body"]["event"] == "test"
    assert server.posts[0]["body"]["text"] == server.posts[0]["body"]["content"] == \
        "FineTune Studio: a test message from workspace my-ws."


# --- the real senders: the worker of a queued run, the store finding a run lost ------------------------------
def test_a_queued_run_that_fails_in_its_worker_posts_once(workspace, subprocess_env, tmp_path):
    from backend.models.hardware import detect_devices
    from backend.runs.queue import enqueue
    from backend.runs.scheduler import QueueScheduler
    from backend.runs.store import RunStore

    store = RunStore(workspace, devices=detect_devices(), env=subprocess_env)
    config = tiny_config(devices="cpu", max_steps=3, run_name="bad", dataset=str(tmp_path / "missing.jsonl"))
    with WebhookServer() as server:
        set_webhook(workspace, server.url)
        run_id = enqueue(store, config)
        scheduler = QueueScheduler(store, interval_s=0.5).start()
        try:
            run_dir = workspace.runs_dir / run_id
            notified = wait_for(lambda: "ok" in (read_status(run_dir).get("notified") or {})
                                and read_status(run_dir)["notified"], "the run's end to be posted", limit_s=300)
            store.refresh(run_id)  # the store sees the worker's own end: nothing more to announce
        finally:
            scheduler.stop()
        assert deliver(run_dir, **QUICK) is None
    assert notified["ok"] and read_status(run_dir)["state"] == "failed"
    assert [(p["body"]["run_id"], p["body"]["state"]) for p in server.posts] == [(run_id, "failed")]
    assert "missing.jsonl" in server.posts[0]["body"]["text"]


def test_a_run_the_store_finds_lost_posts_through_the_detached_sender(workspace, starts_processes):
    import subprocess

    from backend.runs.store import RunStore

    run_dir = workspace.runs_dir / "20250101-140000-gone"
    run_dir.mkdir()
    tiny_config().save(run_dir / "config.yaml")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    update_status(run_dir, state="running", pid=gone.pid, create_time=time.time() - 5, started_at=time.time() - 5)
    with WebhookServer() as server:
        set_webhook(workspace, server.url)
        assert RunStore(workspace).refresh(run_dir.name)["state"] == "lost"
        wait_for(lambda: "ok" in (read_status(run_dir).get("notified") or {}), "the lost run to be posted", limit_s=120)
    assert [p["body"]["state"] for p in server.posts] == ["lost"]
    assert read_status(run_dir)["notified"]["ok"] is True
