"""A word when a run ends: the run's summary POSTed as JSON to its workspace's webhook.

The URL is the workspace's settings.json key "webhook_url" (set in Settings), read from the run's
own workspace (workspace/runs/<id> -> workspace/settings.json), so a run never posts to another
workspace's URL. The body is one JSON object that ntfy, Slack and Discord all take: Slack's incoming
webhooks read "text", Discord's "content" (at most 2000 characters), ntfy publishes the body as the
message (its `?tpl=1&m={{.text}}` template shows only the line); the structured fields sit beside.

Where it fires: every writer of a run's end calls `announce_end` just after writing it: the worker
(backend/training/worker.py: completed, stopped, failed, also for runs the queue started) and the
run store (store.py: killed after a stop's grace period, found lost, a launch that failed). It starts
`python -m backend.runs.notify --run-dir RUN` detached (processes.spawn_module) instead of posting
itself: a detached process outlives the worker, which exits at once and frees its devices for the
queue's next run however slow the webhook server is, and it works alike from the worker, the app
and a `--queue` command. That process claims the end in status.json ("notified", keyed by the
run's ended_at), so one end posts once however many writers announce it; it tries `TRIES` times
with a growing pause, logs each try in the run's notify.log and records the outcome in status.json
"notified". A failure is only logged: the run's state is never touched.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from backend.messages import Message, msg
from backend.runs import processes
from backend.runs.files import CONFIG_FILE, FINAL_STATES, read_status, update_status
from backend.storage.atomic_files import read_json

WEBHOOK_KEY = "webhook_url"  # the workspace's settings.json key
NOTIFY_LOG = "notify.log"    # in the run folder: one line per try and the outcome
END_STATES = (*FINAL_STATES, "lost")
TRIES = 3
PAUSES_S = (2.0, 8.0)        # before the 2nd and the 3rd try (seconds)
TIMEOUT_S = 10.0             # one try's connect + answer (seconds)
DISCORD_LIMIT = 2000         # characters Discord takes in "content"
# Fields of status.json a reader of the end wants; the rest (pids, command) is the app's business.
STATUS_FIELDS = ("model", "method", "devices", "global_step", "max_steps", "epoch", "started_at", "ended_at",
                 "exit_code", "error", "advice", "queued_at", "sweep_id", "resumed_from")


@dataclass(frozen=True)
class Delivery:
    ok: bool
    tries: int
    code: int | None  # the last HTTP status answered, None when none came
    reason: str       # "HTTP 200", or why the last try failed

    def to_dict(self) -> dict:
        return {"ok": self.ok, "tries": self.tries, "code": self.code, "reason": self.reason}


def check_webhook_url(url: str | None) -> Message | None:
    """None when `url` is empty (no webhook) or an http(s) URL with a host; else the sentence why not."""
    text = (url or "").strip()
    if not text:
        return None
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        return msg("notify.url_scheme", url=text)
    if not parts.hostname or any(c.isspace() for c in text):
        return msg("notify.url_host", url=text)
    return None


def webhook_url(workspace_root: Path) -> str | None:
    """The workspace's webhook URL from its settings.json, None when there is none (or it is not http(s))."""
    try:
        settings = json.loads((Path(workspace_root) / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing or unreadable: no webhook, like ui/settings.py's "no saved settings"
        return None
    url = settings.get(WEBHOOK_KEY) if isinstance(settings, dict) else None
    if not isinstance(url, str) or not url.strip() or check_webhook_url(url) is not None:
        return None
    return url.strip()


def workspace_of(run_dir: Path) -> Path | None:
    """The workspace holding a run folder (workspace/runs/<id>); None for folders outside one (a speed probe's)."""
    run_dir = Path(run_dir).resolve()
    return run_dir.parent.parent if run_dir.parent.name == "runs" else None


def announce_end(run_dir: Path) -> bool:
    """Called just after a run's end is written: start the detached sender when the run's workspace
    has a webhook. Never raises: a run's end must not fail because of its notice."""
    try:
        root = workspace_of(run_dir)
        if root is None or webhook_url(root) is None or read_status(run_dir).get("state") not in END_STATES:
            return False
        processes.spawn_module("backend.runs.notify", ["--run-dir", str(Path(run_dir).resolve())],
                               Path(run_dir) / NOTIFY_LOG)
        return True
    except OSError as error:  # no process could start (no memory, a full disk): said in the log, run untouched
        print(f"notify: could not start the webhook sender for {run_dir}: {error}", file=sys.stderr)
        return False


def run_summary(run_dir: Path) -> dict:
    """The run's end as plain JSON: id, state, training stage, the status fields that matter, summary.json."""
    run_dir = Path(run_dir)
    status = read_status(run_dir)
    try:
        config = yaml.safe_load((run_dir / CONFIG_FILE).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        config = {}
    config = config if isinstance(config, dict) else {}
    return {"run_id": run_dir.name, "state": status.get("state"), "stage": config.get("stage", "sft"),
            "dataset": config.get("dataset"), "status": {k: status.get(k) for k in STATUS_FIELDS if k in status},
            "summary": read_json(run_dir / "summary.json", default=None)}


def end_text(summary: dict) -> str:
    """The one line Slack, Discord and ntfy show (English: the backend has no language; docs/CONTRACTS.md)."""
    status = summary.get("status") or {}
    step = status.get("global_step")
    where = f" at step {step}/{status['max_steps']}" if step is not None and status.get("max_steps") else (
        f" at step {step}" if step is not None else "")
    line = f"FineTune Studio: run {summary['run_id']} {summary.get('state')}{where}"
    line += f" ({summary.get('stage')}, {status['model']})." if status.get("model") else "."
    if status.get("error"):
        line += f" {status['error']}"
    return line[:DISCORD_LIMIT]


def webhook_body(summary: dict, text: str | None = None) -> dict:
    line = (text or end_text(summary))[:DISCORD_LIMIT]
    return {"text": line, "content": line, "event": "run_end", **summary}


def post_json(url: str, body: dict, log, tries: int = TRIES, pauses_s=PAUSES_S, timeout_s: float = TIMEOUT_S) -> Delivery:
    """POST `body` as JSON, up to `tries` times: a 5xx, 429, refused connection or timeout is tried
    again after the next pause; another 4xx is final (the same request gets the same answer).
    `log(line)` is told each try."""
    data = json.dumps(body, ensure_ascii=False, default=str).encode("utf-8")
    code, reason = None, ""
    for attempt in range(1, tries + 1):
        request = urllib.request.Request(url, data=data, method="POST", headers={
            "Content-Type": "application/json; charset=utf-8", "User-Agent": "FineTune-Studio",
            "Title": "FineTune Studio"})  # ntfy's notification title; Slack and Discord ignore it
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                code, reason = answer.status, f"HTTP {answer.status}"
        except urllib.error.HTTPError as error:
            code, reason = error.code, f"HTTP {error.code} {error.reason}"
        except (urllib.error.URLError, OSError, ValueError) as error:
            code, reason = None, str(getattr(error, "reason", None) or error)
        log(f"try {attempt} of {tries}: {reason}")
        if code is not None and 200 <= code < 300:
            return Delivery(True, attempt, code, reason)
        if code is not None and 400 <= code < 500 and code != 429:
            return Delivery(False, attempt, code, reason)
        if attempt < tries:
            time.sleep(pauses_s[min(attempt - 1, len(pauses_s) - 1)])
    return Delivery(False, tries, code, reason)


def run_log(run_dir: Path):
    """A `log(line)` that appends a stamped line to the run's notify.log."""
    def log(line: str) -> None:
        with open(Path(run_dir) / NOTIFY_LOG, "a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")
    return log


def deliver(run_dir: Path, **post_options) -> Delivery | None:
    """What the detached sender does for one run end: claim it, POST it, record the outcome.
    None when there is nothing to send (no webhook, not ended, this end already claimed)."""
    run_dir = Path(run_dir)
    root = workspace_of(run_dir)
    url = webhook_url(root) if root else None
    if url is None:
        return None
    token = f"{os.getpid()}-{time.time()}"
    ended = read_status(run_dir).get("ended_at")

    def unclaimed(status: dict) -> bool:  # this end, and nobody posts it yet
        notified = status.get("notified")
        return (status.get("state") in END_STATES and status.get("ended_at") == ended
                and (not notified or notified.get("ended_at") != ended))

    status = update_status(run_dir, when=unclaimed, notified={"ended_at": ended, "claim": token})
    if (status.get("notified") or {}).get("claim") != token:
        return None
    log = run_log(run_dir)
    # The URL itself is a secret (Slack's and Discord's hold their token): only its host goes on disk.
    log(f"run {run_dir.name} {status.get('state')}: posting its summary to the webhook at {urlsplit(url).hostname}")
    delivery = post_json(url, webhook_body(run_summary(run_dir)), log, **post_options)
    log(("sent" if delivery.ok else "not sent") + f" after {delivery.tries} tries: {delivery.reason}")
    update_status(run_dir, notified={"ended_at": ended, "at": time.time(),
                                     **delivery.to_dict()})
    return delivery


def send_test(url: str, workspace_root: Path, log=None, **post_options) -> Delivery:
    """The Settings panel's "Send a test": one POST of a test body to `url` (checked first by the caller)."""
    text = f"FineTune Studio: a test message from workspace {Path(workspace_root).name}."
    body = {"text": text, "content": text, "event": "test", "workspace": Path(workspace_root).name}
    return post_json(url, body, log or (lambda line: None), **post_options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backend.runs.notify",
                                     description="POST a run's end to its workspace's webhook (started by the app).")
    parser.add_argument("--run-dir", type=Path, required=True)
    delivery = deliver(parser.parse_args(argv).run_dir)
    return 0 if delivery is None or delivery.ok else 1


if __name__ == "__main__":
    sys.exit(main())
