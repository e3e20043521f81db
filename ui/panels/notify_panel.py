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

TEXT: dict[str, dict[str, str]] = {
    "notify.heading": {"en": "### When a run ends", "zh": "### 运行结束时"},
    "notify.intro": {
        "en": "A run of this workspace that completes, fails or stops can post its summary to a webhook "
              "(ntfy, Slack or Discord: paste the URL they give you), and the open page can show a "
              "browser notification.",
        "zh": "本工作区的运行完成、失败或停止时，可以把摘要发送到 webhook（ntfy、Slack 或 Discord："
              "粘贴它们给你的地址），打开的页面也可以弹出浏览器通知。"},
    "notify.url": {"en": "Webhook URL (empty: none)", "zh": "Webhook 地址（留空：不使用）"},
    "notify.save": {"en": "Save", "zh": "保存"},
    "notify.test": {"en": "Send a test", "zh": "发送测试"},
    "notify.allow": {"en": "Notify me when a run ends", "zh": "运行结束时通知我"},
    "notify.perm.granted": {"en": "Browser notifications are on: this page tells you when a run ends, from any tab.",
                            "zh": "浏览器通知已开启：运行结束时，本页面会在任何标签页下提醒你。"},
    "notify.perm.denied": {"en": "The browser blocks notifications for this page: allow them in the site's "
                                 "settings (the icon left of the address), then press the button again.",
                           "zh": "浏览器禁止了本页面的通知：请在网站设置（地址栏左侧的图标）中允许通知，然后再按一次按钮。"},
    "notify.perm.default": {"en": "No answer yet: press the button and choose Allow.",
                            "zh": "尚未选择：请按按钮并选择“允许”。"},
    "notify.perm.unsupported": {"en": "This browser has no notifications; the page title still shows the run's state.",
                                "zh": "此浏览器不支持通知；页面标题仍会显示运行状态。"},
}

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
