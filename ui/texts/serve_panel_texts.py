"""The texts of ui/panels/serve_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

TEXT: dict[str, dict[str, str]] = {
    "serve.title": {"en": "Serve as an OpenAI-compatible API", "zh": "作为 OpenAI 兼容 API 提供服务"},
    "serve.run": {"en": "Run to serve", "zh": "要提供服务的训练运行"},
    "serve.local": {"en": "…or a model on this machine (served instead of the run)",
                    "zh": "……或本机已有的模型（代替训练运行提供服务）"},
    "serve.local_none": {"en": "— none: serve the run —", "zh": "—— 无：为训练运行提供服务 ——"},
    "serve.port": {"en": "Port", "zh": "端口"},
    "serve.device": {"en": "Device", "zh": "设备"},
    "serve.start": {"en": "Start server", "zh": "启动服务"},
    "serve.stop": {"en": "Stop server", "zh": "停止服务"},
    "serve.url": {"en": "Base URL", "zh": "基础 URL"},
    "serve.curl": {"en": "curl example", "zh": "curl 示例"},
    "serve.python": {"en": "Python example (openai package)", "zh": "Python 示例（openai 包）"},
    "serve.msg_idle": {"en": "No server running. Pick a run and a port, then Start: every checkpoint of the run "
                             "becomes a model name on 127.0.0.1.",
                       "zh": "没有正在运行的服务。选择训练运行和端口后点击启动：该运行的每个检查点都会成为 127.0.0.1 上的一个模型名。"},
    "serve.msg_serving_local": {"en": "Serving **{name}** (a model on this machine) at {url} · model name: {models} "
                                      "· one request generates at a time, others queue.",
                                "zh": "正在为 **{name}**（本机已有的模型）提供服务：{url} · 模型名：{models} · "
                                      "每次生成一个请求，其余排队。"},
    "serve.msg_loading": {"en": "Starting: loading {models} … (pid {pid})", "zh": "正在启动：加载 {models} ……（进程 {pid}）"},
    "serve.msg_serving": {"en": "Serving run **{run}** at {url} · models: {models} · one request generates at a "
                                "time, others queue.",
                          "zh": "正在提供运行 **{run}** 的服务：{url} · 模型：{models} · 每次生成一个请求，其余排队。"},
    "serve.msg_stopped": {"en": "The server is stopped.", "zh": "服务已停止。"},
    "serve.msg_failed": {"en": "The server failed: {error} (log: {log})", "zh": "服务失败：{error}（日志：{log}）"},
    "serve.msg_started": {"en": "Server starting in the background (pid {pid}); it keeps running if you close this page.",
                          "zh": "服务正在后台启动（进程 {pid}）；关闭本页面后它仍会继续运行。"},
    "serve.msg_not_running": {"en": "No server is running.", "zh": "没有正在运行的服务。"},
    "serve.msg_pick_run": {"en": "Pick a run to serve first.", "zh": "请先选择要提供服务的训练运行。"},
    "serve.msg_refused": {"en": "Cannot start: {reason}", "zh": "无法启动：{reason}"},
}
