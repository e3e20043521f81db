"""The texts of ui/panels/sweep_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _

TEXT: dict[str, dict[str, str]] = {
    "train.sweep.section": _("Sweep: several runs over a grid of settings", "扫描：在设置网格上运行多次"),
    "train.sweep.intro": _("The form above is the base of every run. Name one to three settings and their values "
                     "(comma-separated, such as `1e-4, 3e-4`); every combination is one queued run.",
                     "上面的表单是每次运行的基础。填写一到三个设置及其取值（用逗号分隔，例如 `1e-4, 3e-4`）；"
                     "每个组合都是一次排队的运行。"),
    "train.sweep.target": _("Target metric", "目标指标"),
    "train.sweep.direction": _("Best is", "最佳为"),
    "train.sweep.direction.auto": _("auto (min for losses)", "自动（损失取最小）"),
    "train.sweep.max_runs": _("Budget: at most this many runs", "预算：最多运行次数"),
    "train.sweep.sample": _("Random sample of the grid (0: the whole grid)", "从网格中随机抽取（0：整个网格）"),
    "train.sweep.seed": _("Sample seed", "抽样种子"),
    "train.sweep.check": _("Check sweep", "检查扫描"),
    "train.sweep.queue": _("Queue sweep", "排队扫描"),
    "train.sweep.plan": _("**{count} runs** over {fields}; target {target} ({direction}).", "**{count} 次运行**，变化 {fields}；目标 {target}（{direction}）。"),
    "train.sweep.queued_runs": _("Queued: {runs}. The Runs tab's compare view shows the sweep's table.",
                           "已排队：{runs}。“运行”页的对比视图中有该扫描的表格。"),
}
