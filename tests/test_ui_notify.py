"""The run-end notice's handlers without a browser (ui/panels/run_notice.py: the page title and the
Notification's texts; ui/panels/notify_panel.py: the webhook URL saved or refused, the test message, the
permission sentence), in English and Chinese, on real run folders and a real local HTTP server."""

from __future__ import annotations

import json
import os
import time

import psutil
import pytest

from backend.messages import msg
from backend.runs.files import update_status
from backend.runs.workspace import Workspace
from tests.webhook_server import WebhookServer
from ui.context import UIContext
from ui.i18n import merge_texts
from ui.panels import notify_panel, run_notice
from ui.settings import load_settings


@pytest.fixture
def ctx(tmp_path):
    workspace = Workspace(tmp_path / "ws").ensure()
    return UIContext(workspace=workspace, texts=merge_texts(run_notice.TEXT, notify_panel.TEXT), i18n=None)


def make_run(ctx: UIContext, run_id: str, **status) -> None:
    run_dir = ctx.workspace.runs_dir / run_id
    run_dir.mkdir()
    update_status(run_dir, run_id=run_id, **status)


def running_here(**more) -> dict:
    """A status whose process is this test's own (alive, same start time): the store keeps it running."""
    return {"state": "running", "pid": os.getpid(), "create_time": psutil.Process().create_time(),
            "started_at": time.time(), **more}


def test_the_title_shows_the_running_run_and_the_latest_end_in_both_languages(ctx):
    assert json.loads(run_notice.notice(ctx, "en"))["title"] == "FineTune Studio"  # no runs yet
    make_run(ctx, "20250101-100000-old", state="failed", started_at=time.time() - 90, ended_at=time.time() - 50,
             error="The dataset file is missing.", global_step=3, max_steps=40)
    ended = json.loads(run_notice.notice(ctx, "en"))
    assert ended["title"] == "✗ failed · FineTune Studio"
    [run] = ended["runs"]
    assert run == {"run_id": "20250101-100000-old", "state": "failed", "ended": True,
                   "notice_title": "Run 20250101-100000-old failed", "notice_body": "The dataset file is missing."}
    make_run(ctx, "20250101-110000-live", **running_here(global_step=12, max_steps=40))
    live = json.loads(run_notice.notice(ctx, "en"))
    assert live["title"] == "▶ step 12/40 · FineTune Studio"
    assert [(r["run_id"], r["state"], r["ended"]) for r in live["runs"]] == [
        ("20250101-110000-live", "running", False), ("20250101-100000-old", "failed", True)]
    assert json.loads(run_notice.notice(ctx, "zh"))["title"] == "▶ 第 12/40 步 · FineTune Studio"
    update_status(ctx.workspace.runs_dir / "20250101-110000-live", state="completed", ended_at=time.time())
    done_zh = json.loads(run_notice.notice(ctx, "zh"))
    assert done_zh["title"] == "✓ 已完成 · FineTune Studio"
    assert done_zh["runs"][0]["notice_title"] == "运行 20250101-110000-live 已完成"
    assert done_zh["runs"][0]["notice_body"] == "第 12/40 步"
    assert set(done_zh["end_states"]) == {"completed", "stopped", "failed", "lost"}


def test_a_catalogued_error_is_told_in_chinese_and_old_or_waiting_runs_are_left_out(ctx):
    make_run(ctx, "20250101-100000-gone", state="lost", ended_at=time.time(), started_at=time.time() - 5,
             error="The worker exited with code 3; see train.log.",
             error_message=msg("run.exited", code=3).to_dict())
    make_run(ctx, "20250101-090000-ancient", state="completed", ended_at=time.time() - 3 * 24 * 3600)
    make_run(ctx, "20250101-120000-waiting", state="queued", queue_seq=1.0)  # waits: no pid, not shown
    told = json.loads(run_notice.notice(ctx, "zh"))
    assert [r["run_id"] for r in told["runs"]] == ["20250101-100000-gone"]
    assert told["title"] == "✗ 已丢失 · FineTune Studio"
    assert told["runs"][0]["notice_body"] == "训练进程以退出码 3 结束；详见 train.log。"


def test_a_good_url_is_saved_a_bad_one_refused_with_a_sentence_and_an_empty_one_clears(ctx):
    assert "ntfy.sh" in notify_panel.save_webhook(ctx, "en", " https://ntfy.sh/my-runs ")
    assert load_settings(ctx.workspace)["webhook_url"] == "https://ntfy.sh/my-runs"
    for bad in ("ftp://x", "not a url"):
        refused = notify_panel.save_webhook(ctx, "en", bad)
        assert f"{bad!r}" in refused and "http:// or https://" in refused
        assert "http:// 或 https://" in notify_panel.save_webhook(ctx, "zh", bad)
    assert load_settings(ctx.workspace)["webhook_url"] == "https://ntfy.sh/my-runs"  # a refusal keeps the old one
    assert notify_panel.saved_url(ctx) == "https://ntfy.sh/my-runs"
    assert "post nothing" in notify_panel.save_webhook(ctx, "en", "")
    assert "webhook_url" not in load_settings(ctx.workspace) and notify_panel.saved_url(ctx) == ""
    assert "未设置 webhook" in notify_panel.save_webhook(ctx, "zh", "")


def test_send_a_test_tells_what_the_server_answered(ctx):
    assert "Type a webhook URL first" in notify_panel.send_test_message(ctx, "en", "")
    assert "ftp://x" in notify_panel.send_test_message(ctx, "en", "ftp://x")
    with WebhookServer() as server:
        sent = notify_panel.send_test_message(ctx, "en", server.url)
        sent_zh = notify_panel.send_test_message(ctx, "zh", server.url)
    assert sent == "Test sent: 127.0.0.1 answered HTTP 200 (try 1)."
    assert sent_zh == "测试已发送：127.0.0.1 回复 HTTP 200（第 1 次尝试）。"
    assert [p["body"]["event"] for p in server.posts] == ["test", "test"]
    with WebhookServer(answers=[503]) as failing:
        failed = notify_panel.send_test_message(ctx, "en", failing.url)
    assert failed.startswith("The test did not arrive at 127.0.0.1 after 1 tries: HTTP 503")


def test_the_permission_sentence_for_each_answer_of_the_browser(ctx):
    assert "notifications are on" in notify_panel.permission_sentence(ctx, "en", "granted")
    assert "site's settings" in notify_panel.permission_sentence(ctx, "en", "denied")
    assert "choose Allow" in notify_panel.permission_sentence(ctx, "en", "default")
    assert "choose Allow" in notify_panel.permission_sentence(ctx, "en", None)
    assert "no notifications" in notify_panel.permission_sentence(ctx, "en", "unsupported")
    assert "浏览器通知已开启" in notify_panel.permission_sentence(ctx, "zh", "granted")
