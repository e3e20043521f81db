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
from ui.texts.serve_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)

POLL_EVERY_S = 2.0
DEFAULT_PORT = 8000

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
    ctx.timers.poll(POLL_EVERY_S, show["fn"], show["inputs"], show["outputs"])
    run.focus(**listing)
    locals_ = {"fn": partial(local_list, workspace), "inputs": [ctx.lang, local], "outputs": local, **private}
    gr.context.Context.root_block.load(**locals_)
    local.focus(**locals_)
    start.click(partial(start_server, workspace), [ctx.lang, run, port, device, local], notice,
                **private).then(**show)
    stop.click(partial(stop_server, workspace), ctx.lang, notice, **private).then(**show)
