"""The texts of ui/panels/diagnostics_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _

TEXT: dict[str, dict[str, str]] = {
    "runs.diag.title": _("Diagnostics", "诊断信息"),
    "runs.diag.about": _("One zip for a bug report: the run's config, status, summary, the last 500 lines of "
                         "train.log and metrics, the library versions, the hardware, the app's flags and the OS. "
                         "API keys, passwords, tokens, webhook URLs and your home folder's path are removed first.",
                         "用于提交问题报告的一个压缩包：运行的配置、状态、摘要、train.log 的最后 500 行和指标，"
                         "以及库版本、硬件、应用的启动参数和操作系统。API 密钥、密码、令牌、webhook 地址和你的主目录路径会先被移除。"),
    "runs.diag.make": _("Make diagnostics zip", "生成诊断压缩包"),
    "runs.diag.file": _("Diagnostics zip", "诊断压缩包"),
    "runs.diag.pick": _("Pick a run above first.", "请先在上方选择一个运行。"),
    "runs.diag.error": _("❌ {error}", "❌ {error}"),
    "runs.diag.made": _("**{name}** holds {count} files ({size}); check it before you attach it:",
                        "**{name}** 含 {count} 个文件（{size}）；附上之前请先检查："),
    "runs.diag.col.file": _("file", "文件"),
    "runs.diag.col.size": _("size", "大小"),
    "runs.diag.col.holds": _("holds", "内容"),
    "runs.diag.col.redacted": _("removed", "已移除"),
    "runs.diag.missing": _("Not in the run folder (listed in manifest.json): {files}.",
                           "运行文件夹中没有（已记入 manifest.json）：{files}。"),
    "runs.diag.env": _("Variables whose values were removed: {names}.", "已移除其值的环境变量：{names}。"),
    "runs.diag.nothing": _("nothing", "无"),
    "runs.diag.holds.config.yaml": _("the run's settings", "运行的设置"),
    "runs.diag.holds.status.json": _("state, error, launch command", "状态、错误、启动命令"),
    "runs.diag.holds.summary.json": _("steps, time, speed, memory", "步数、用时、速度、内存"),
    "runs.diag.holds.train.log": _("the worker's log", "训练进程的日志"),
    "runs.diag.holds.train.log.tail": _("the last 500 lines of the worker's log", "训练进程日志的最后 500 行"),
    "runs.diag.holds.metrics.jsonl": _("the logged numbers", "记录的指标"),
    "runs.diag.holds.settings.json": _("the workspace's settings", "工作区的设置"),
    "runs.diag.holds.versions.json": _("Python and library versions", "Python 与库的版本"),
    "runs.diag.holds.hardware.json": _("CPU and its flags, GPUs, RAM, free disk", "CPU 及其指令集、GPU、内存、剩余磁盘"),
    "runs.diag.holds.system.json": _("OS, Python, the app's flags, library variables",
                                     "操作系统、Python、应用的启动参数、库的环境变量"),
    "runs.diag.kind.api_key": _("API key", "API 密钥"),
    "runs.diag.kind.auth": _("--auth password", "--auth 密码"),
    "runs.diag.kind.env": _("secret variable", "机密环境变量"),
    "runs.diag.kind.webhook": _("webhook URL", "webhook 地址"),
    "runs.diag.kind.url": _("URL with a token", "含令牌的地址"),
    "runs.diag.kind.flag": _("secret flag", "机密参数"),
    "runs.diag.kind.named": _("secret field", "机密字段"),
    "runs.diag.kind.bearer": _("bearer token", "Bearer 令牌"),
    "runs.diag.kind.setting": _("secret setting", "机密设置"),
    "runs.diag.kind.home": _("home path → ~", "主目录路径 → ~"),
}
