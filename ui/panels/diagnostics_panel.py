"""The Runs tab's Diagnostics accordion: one click writes the watched run's diagnostics zip
(backend/runs/diagnose.py) under workspace/diagnostics/, shows what it holds (each file, its size, what was
redacted) and offers it for download, so a bug report carries logs, versions and hardware without secrets.

Handlers are plain functions (tests/test_ui_diagnostics.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import gradio as gr

from backend.runs.diagnose import DiagnoseError, DiagnosticsReport, diagnostics_zip
from ui.context import UIContext
from ui.i18n import localize


def _(en: str, zh: str) -> dict[str, str]:
    return {"en": en, "zh": zh}


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


def app_argv() -> list[str] | None:
    """The app's command line when this process is app.py (its flags go into system.json, redacted)."""
    return list(sys.argv) if sys.argv and Path(sys.argv[0]).name == "app.py" else None


def make_zip(ctx: UIContext, lang: str | None, run_id: str | None) -> tuple[str, str | None]:
    """(what the zip holds as markdown, its path to download), or (why not, None)."""
    if not run_id:
        return ctx.msg(lang, "runs.diag.pick"), None
    try:
        report = diagnostics_zip(ctx.workspace, run_id, app_argv=app_argv())
    except DiagnoseError as error:
        return ctx.msg(lang, "runs.diag.error", error=localize(error, lang)), None
    return manifest_markdown(ctx, lang, report), str(report.path)


def manifest_markdown(ctx: UIContext, lang: str | None, report: DiagnosticsReport) -> str:
    def t(key: str, **values) -> str:
        return ctx.msg(lang, key, **values)

    total = report.path.stat().st_size
    lines = [t("runs.diag.made", name=report.path.name, count=len(report.files) + 1, size=_size(total)), "",
             f"| {t('runs.diag.col.file')} | {t('runs.diag.col.size')} | {t('runs.diag.col.holds')} | "
             f"{t('runs.diag.col.redacted')} |", "|---|---:|---|---|"]
    for entry in report.files:
        name = entry["name"]
        holds = f"runs.diag.holds.{name}" + (".tail" if entry["source"] != name and name == "train.log" else "")
        removed = ", ".join(f"{_kind(ctx, lang, k)} ×{n}" for k, n in entry["redacted"].items())
        lines.append(f"| `{name}` | {_size(entry['bytes'])} | {t(holds) if holds in ctx.texts else entry['source']} | "
                     f"{removed or t('runs.diag.nothing')} |")
    if report.missing:
        lines += ["", t("runs.diag.missing", files=", ".join(f"`{m}`" for m in report.missing))]
    if report.redacted_env:
        lines += ["", t("runs.diag.env", names=", ".join(f"`{n}`" for n in report.redacted_env))]
    return "\n".join(lines)


def _kind(ctx: UIContext, lang: str | None, kind: str) -> str:
    key = f"runs.diag.kind.{kind}"
    return ctx.msg(lang, key) if key in ctx.texts else kind


def _size(count: int) -> str:
    return f"{count} B" if count < 1024 else f"{count / 1024:.1f} KiB" if count < 2**20 else f"{count / 2**20:.1f} MiB"


def build(ctx: UIContext, select) -> None:
    """The accordion under the run picker `select`."""
    with gr.Accordion(ctx.t("runs.diag.title"), open=False, elem_id="runs-diagnostics"):
        gr.Markdown(ctx.t("runs.diag.about"))
        button = gr.Button(ctx.t("runs.diag.make"), elem_id="runs-diagnostics-make")
        shown = gr.Markdown(elem_id="runs-diagnostics-manifest")
        download = gr.File(label=ctx.t("runs.diag.file"), interactive=False, elem_id="runs-diagnostics-file")
    button.click(lambda lang, run_id: make_zip(ctx, lang, run_id), [ctx.lang, select], [shown, download],
                 api_visibility="private")
