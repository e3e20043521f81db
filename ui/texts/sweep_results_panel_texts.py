"""The texts of ui/panels/sweep_results_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _

TEXT: dict[str, dict[str, str]] = {
    "runs.sweep": _("Sweeps", "扫描"),
    "runs.sweep.pick": _("Sweep", "扫描"),
    "runs.sweep.refresh": _("Refresh sweep", "刷新扫描"),
    "runs.sweep.none": _("No sweep in this workspace yet: the Train tab's Sweep section or "
                         "`python -m backend.train --config run.yaml --sweep sweep.yaml` makes one.",
                         "此工作区还没有扫描：可在“训练”页的扫描部分，或用 "
                         "`python -m backend.train --config run.yaml --sweep sweep.yaml` 创建。"),
    "runs.sweep.best": _("Best by {target} ({direction}): **{run_id}** ({values}), {target} = {value:.4g}.",
                         "按 {target}（{direction}）最佳：**{run_id}**（{values}），{target} = {value:.4g}。"),
    "runs.sweep.no_best": _("No run of the sweep has completed with {target} yet.",
                            "扫描中还没有带 {target} 的已完成运行。"),
    "runs.sweep.open_chat": _("Open best in Chat", "在对话中打开最佳运行"),
    "runs.sweep.open_evaluate": _("Open best in Evaluate", "在评估中打开最佳运行"),
    "runs.sweep.open_export": _("Open best in Export", "在导出中打开最佳运行"),
    "runs.sweep.col.best": _("best", "最佳"),
    "runs.sweep.col.run": _("run", "运行"),
    "runs.sweep.col.state": _("state", "状态"),
    "runs.sweep.col.time": _("time (s)", "时间（秒）"),
    "runs.sweep.col.tokens": _("tokens/s", "token/秒"),
    "runs.sweep.col.memory": _("peak memory (GiB)", "峰值内存（GiB）"),
}
