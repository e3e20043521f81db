"""The Serve panel of the Chat tab: start / stop `python -m backend.serve` for one
run, or for one model on this machine (the scan's cached list, backend/chat/local_targets.py),
as a background job (backend/serve/server_job.py) and show its base URL, model names and
copyable curl / Python examples.

The handlers are module-level functions over plain values (workspace, language,
run id, port), so they are tested without a browser; build() only wires them.
"""

from __future__ import annotations

import json
from functools import partial

from backend.chat.catalog import local_choices
from backend.runs.files import list_run_ids
from backend.runs.jobs import COMPLETED, FAILED, RUNNING
from backend.serve.server_job import ServeJobError, server_log_path, start, start_local, status, stop
from ui.run_choice import run_dropdown

POLL_EVERY_S = 2.0
DEFAULT_PORT = 8000

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


def _msg(lang: str | None, key: str, **values) -> str:
    entry = TEXT[key]
    text = entry.get(lang or "en") or entry["en"]
    return text.format(**values) if values else text


def examples(url: str, model: str) -> tuple[str, str]:
    """(curl command, Python program) that ask `model` at `url` one question."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 64})
    curl = f"curl {url}/chat/completions \\\n  -H 'Content-Type: application/json' \\\n  -d '{body}'"
    python = (
        "from openai import OpenAI\n\n"
        f'client = OpenAI(base_url="{url}", api_key="none")\n'
        "reply = client.chat.completions.create(\n"
        f'    model="{model}",\n'
        '    messages=[{"role": "user", "content": "Hello!"}],\n'
        "    max_tokens=64,\n"
        ")\n"
        "print(reply.choices[0].message.content)\n"
    )
    return curl, python


def view(workspace, lang: str | None) -> tuple[str, str, str, str]:
    """(status line, base URL, curl example, Python example) from the job's progress file."""

    progress = status(workspace)
    state = progress.get("state")
    models = progress.get("models") or []
    if state == RUNNING and progress.get("stage") == "serving":
        url = progress.get("url", "")
        curl, python = examples(url, models[-1] if models else "base")
        line = (_msg(lang, "serve.msg_serving_local", name=progress["local"], url=url, models=", ".join(models))
                if progress.get("local") else
                _msg(lang, "serve.msg_serving", run=progress.get("run_id", "?"), url=url, models=", ".join(models)))
        return line, url, curl, python
    if state == RUNNING:
        line = _msg(lang, "serve.msg_loading", models=", ".join(models) or "…", pid=progress.get("pid"))
    elif state == FAILED:
        line = "⚠️ " + _msg(lang, "serve.msg_failed", error=progress.get("error") or "?", log=server_log_path(workspace))
    elif state == COMPLETED:
        line = _msg(lang, "serve.msg_stopped")
    else:
        line = _msg(lang, "serve.msg_idle")
    return line, "", "", ""


def start_server(workspace, lang: str | None, run_id: str | None, port, device: str | None,
                 local: str | None = None) -> str:
    """Starts the server for `local` (a path of the local list) when one is picked, else for the run."""

    if not run_id and not local:
        return "⚠️ " + _msg(lang, "serve.msg_pick_run")
    try:
        if local:
            pid = start_local(workspace, local, int(port or DEFAULT_PORT), device or "cpu")
        else:
            pid = start(workspace, run_id, int(port or DEFAULT_PORT), device or "cpu")
    except (ServeJobError, ValueError, OSError) as error:
        return "⚠️ " + _msg(lang, "serve.msg_refused", reason=error)
    return _msg(lang, "serve.msg_started", pid=pid)


def stop_server(workspace, lang: str | None) -> str:
    return _msg(lang, "serve.msg_stopped" if stop(workspace) else "serve.msg_not_running")


def refresh(workspace, lang: str | None, current: str | None) -> tuple:
    """(run list update, then view's four values): on page load and when the run list opens."""
    run, _ = run_dropdown(list_run_ids(workspace.runs_dir), current)
    return (run, *view(workspace, lang))


def local_list(workspace, lang: str | None, current: str | None):
    """The models on this machine from the scan's cache (never a scan here), after "none"; the current
    pick kept while it is listed."""
    import gradio as gr

    choices = [(_msg(lang, "serve.local_none"), ""), *local_choices(workspace.root)]
    return gr.update(choices=choices, value=current if current in {v for _, v in choices} else "")


def build(ctx) -> None:
    import gradio as gr

    workspace = ctx.workspace
    private = {"api_visibility": "private"}
    with gr.Accordion(ctx.t("serve.title"), open=False, elem_id="serve-panel"):
        with gr.Row(equal_height=True):
            run = gr.Dropdown(label=ctx.t("serve.run"), choices=[], scale=3, elem_id="serve-run")
            local = gr.Dropdown(label=ctx.t("serve.local"), choices=[], value=None, scale=3, elem_id="serve-local")
            port = gr.Number(value=DEFAULT_PORT, precision=0, minimum=1024, maximum=65535, label=ctx.t("serve.port"),
                             scale=1, elem_id="serve-port")
            device = gr.Dropdown(label=ctx.t("serve.device"), choices=["cpu"], value="cpu", scale=1,
                                 allow_custom_value=True, elem_id="serve-device")
            start = gr.Button(ctx.t("serve.start"), variant="primary", scale=1, elem_id="serve-start")
            stop = gr.Button(ctx.t("serve.stop"), variant="stop", scale=1, elem_id="serve-stop")
        notice = gr.Markdown(elem_id="serve-notice")
        line = gr.Markdown(elem_id="serve-status")
        url = gr.Textbox(label=ctx.t("serve.url"), interactive=False, buttons=["copy"], elem_id="serve-url")
        with gr.Row():
            curl = gr.Code(label=ctx.t("serve.curl"), language="shell", interactive=False, elem_id="serve-curl")
            python = gr.Code(label=ctx.t("serve.python"), language="python", interactive=False, elem_id="serve-python")

    shown = [line, url, curl, python]
    listing = {"fn": partial(refresh, workspace), "inputs": [ctx.lang, run], "outputs": [run, *shown], **private}
    show = {"fn": partial(view, workspace), "inputs": ctx.lang, "outputs": shown, **private}
    gr.context.Context.root_block.load(**listing)
    gr.Timer(POLL_EVERY_S).tick(show_progress="hidden", **show)
    run.focus(**listing)
    locals_ = {"fn": partial(local_list, workspace), "inputs": [ctx.lang, local], "outputs": local, **private}
    gr.context.Context.root_block.load(**locals_)
    local.focus(**locals_)
    start.click(partial(start_server, workspace), [ctx.lang, run, port, device, local], notice,
                **private).then(**show)
    stop.click(partial(stop_server, workspace), ctx.lang, notice, **private).then(**show)
