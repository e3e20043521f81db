"""The texts of ui/panels/notify_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

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
