"""Settings panel "When a run ends": the workspace's webhook URL (settings.json "webhook_url",
read by backend/runs/notify.py when a run ends), a test message, and the browser's permission
for the notification ui/panels/run_notice.py shows."""

from __future__ import annotations

from urllib.parse import urlsplit

import gradio as gr

from backend.messages import msg
from backend.runs.notify import WEBHOOK_KEY, check_webhook_url, send_test
from ui.context import UIContext
from ui.i18n import localize
from ui.texts.notify_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)

# Asks the browser for permission (it must come from a click) and hands the answer to Python.
PERMISSION_JS = """
async (lang, answer) => {
  if (!("Notification" in window)) { return [lang, "unsupported"]; }
  return [lang, await Notification.requestPermission()];
}
"""


def saved_url(ctx: UIContext) -> str:
    return ctx.saved().get(WEBHOOK_KEY) or ""


def save_webhook(ctx: UIContext, lang: str, url: str) -> str:
    """Keep the URL in settings.json, or refuse it with the sentence why; an empty box removes it."""
    url = (url or "").strip()
    refusal = check_webhook_url(url)
    if refusal is not None:
        return localize(refusal, lang)
    ctx.remember(**{WEBHOOK_KEY: url or None})
    return localize(msg("notify.saved", host=urlsplit(url).hostname) if url else msg("notify.cleared"),
                    lang)


def send_test_message(ctx: UIContext, lang: str, url: str, **post_options) -> str:
    """POST a test body to the URL in the box (saved or not) and say how it went."""
    url = (url or "").strip()
    if not url:
        return localize(msg("notify.no_url"), lang)
    refusal = check_webhook_url(url)
    if refusal is not None:
        return localize(refusal, lang)
    delivery = send_test(url, ctx.workspace.root, **{"tries": 1, **post_options})  # a click waits: one try
    key = "notify.test_sent" if delivery.ok else "notify.test_failed"
    return localize(msg(key, host=urlsplit(url).hostname, reason=delivery.reason, tries=delivery.tries), lang)


def permission_sentence(ctx: UIContext, lang: str, permission: str) -> str:
    known = permission if permission in ("granted", "denied", "unsupported") else "default"
    return ctx.msg(lang, f"notify.perm.{known}")


def build(ctx: UIContext) -> None:
    gr.Markdown(ctx.t("notify.heading"))
    gr.Markdown(ctx.t("notify.intro"))
    url = gr.Textbox(label=ctx.t("notify.url"), placeholder="https://ntfy.sh/your-topic", elem_id="notify-url")
    with gr.Row():
        save = gr.Button(ctx.t("notify.save"), elem_id="notify-save")
        test = gr.Button(ctx.t("notify.test"), elem_id="notify-test")
        allow = gr.Button(ctx.t("notify.allow"), elem_id="notify-allow")
    said = gr.Markdown(elem_id="notify-said")
    permission = gr.Textbox(visible="hidden")
    private = {"api_visibility": "private"}
    # Read at each page load, so the URL saved by another page shows here; a private event (a callable
    # value would be a public API endpoint that hands the URL, a secret of its own, to any client).
    gr.context.Context.root_block.load(lambda: saved_url(ctx), None, url, **private)
    save.click(lambda lang, u: save_webhook(ctx, lang, u), [ctx.lang, url], said, **private)
    test.click(lambda lang, u: send_test_message(ctx, lang, u), [ctx.lang, url], said, **private)
    allow.click(lambda lang, p: permission_sentence(ctx, lang, p), [ctx.lang, permission], said,
                js=PERMISSION_JS, **private)
