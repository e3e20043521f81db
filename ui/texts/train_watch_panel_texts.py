"""The texts of ui/panels/train_watch_panel.py, English and Chinese (the rule: ui/texts/__init__.py)."""

from __future__ import annotations

from ui.texts import both as _

TEXT: dict[str, dict[str, str]] = {
    "train.watch.title": _("Run <b>{run}</b>: {state} (charts, log and Stop in the Runs tab)",
                           "运行 <b>{run}</b>：{state}（图表、日志与停止在“运行”页）"),
    "train.watch.loss": _("train loss {first} → {last} over {points} logged steps",
                          "训练损失 {first} → {last}，共 {points} 个记录步"),
}
