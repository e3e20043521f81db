"""What the Runs tab shows about runs, as plain values (no gradio): the table
rows, the progress line with elapsed time and ETA, the alert for a failed or
lost run, the config differences between runs, and the per-run watcher that
tails metrics.jsonl incrementally.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from backend.runs.files import MetricsTail
from backend.runs.store import RunInfo
from ui.i18n import localize

Msg = Callable[..., str]
TABLE_COLUMNS = ("run", "state", "model", "method", "progress", "best_eval_loss", "started", "duration",
                 "preference_accuracy")
STATE_ICONS = {"queued": "⏳", "running": "🟢", "completed": "✅", "stopped": "⏹", "failed": "❌", "lost": "⚠️"}


@dataclass
class Watch:
    """One session's view of one run: its MetricsTail and the records read so
    far. Kept in gr.State, so each browser tab has its own and nothing is global."""
    run_id: str | None = None
    tail: MetricsTail | None = None
    records: list[dict] = field(default_factory=list)

    def follow(self, run_id: str | None, run_dir) -> bool:
        """Switch to `run_id` (from its first record) when it changed; True when it did."""
        if run_id == self.run_id:
            return False
        self.run_id, self.records = run_id, []
        self.tail = MetricsTail(run_dir) if run_id else None
        return True

    def read_new(self) -> list[dict]:
        new = self.tail.read_new() if self.tail else []
        self.records.extend(new)
        return new


def duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return ""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def run_seconds(info: RunInfo, now: float | None = None) -> float | None:
    if not info.started_at:
        return None
    end = info.ended_at if info.state not in ("queued", "running") and info.ended_at else (now or time.time())
    return end - info.started_at


def table_rows(infos: list[RunInfo], msg: Msg | None = None) -> list[list]:
    """The runs table's rows; `msg` gives the states in the user's language (runs.state.*), else as on disk."""
    rows = []
    for info in infos:
        when = info.started_at or info.created_at
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(when)) if when else ""  # not 1970 for "unknown"
        best = f"{info.best_eval_loss:.4f}" if info.best_eval_loss is not None else ""
        progress = f"{info.progress:.0%}" if not info.stage else f"🔧 {info.stage_fraction or 0:.0%}"
        method = info.method if info.training_stage == "sft" else f"{info.method} · {info.training_stage}"
        accuracy = f"{info.preference_accuracy:.1%}" if info.preference_accuracy is not None else ""
        state = msg(f"runs.state.{info.state}") if msg and info.state in STATE_ICONS else info.state
        rows.append([info.run_id, f"{STATE_ICONS.get(info.state, '')} {state}", info.model, method,
                     progress, best, started, duration(run_seconds(info)), accuracy])
    return rows


def eta_seconds(records: list[dict], max_steps: int | None) -> float | None:
    """Remaining time from the step rate of the current session (records after
    the last start / resume event), so a resumed run's pause is not counted."""
    if not max_steps:
        return None
    start = max((i for i, r in enumerate(records) if r.get("kind") == "system" and r.get("event") != "end"),
                default=-1)
    points = [(r["time"], r["step"]) for r in records[start + 1:] if r.get("kind") == "train" and "time" in r]
    if len(points) < 2 or points[-1][1] <= points[0][1]:
        return None
    rate = (points[-1][0] - points[0][0]) / (points[-1][1] - points[0][1])  # seconds per step
    return max(0.0, (max_steps - points[-1][1]) * rate)


def progress_html(msg: Msg, info: RunInfo, records: list[dict]) -> str:
    if info.stage:  # a stage before training (the demo model's first build): its own bar
        fraction = info.stage_fraction or 0.0
        text = stage_text(msg, info.stage, duration(run_seconds(info)) or "-")
        return (f'<div class="run-progress run-stage"><progress value="{fraction * 100:.1f}" max="100" '
                f'style="width:100%"></progress><div>{fraction:.0%} · {text}</div></div>')
    percent = round(info.progress * 100, 1)
    eta = eta_seconds(records, info.max_steps) if info.state == "running" else None
    text = msg("runs.progress", step=info.global_step, max_steps=info.max_steps or "?",
               elapsed=duration(run_seconds(info)) or "-", eta=duration(eta) or "-")
    return (f'<div class="run-progress"><progress value="{percent}" max="100" style="width:100%"></progress>'
            f"<div>{percent}% · {text}</div></div>")


def stage_text(msg: Msg, stage: dict, elapsed: str) -> str:
    """The sentence of a stage before training (status.json `stage`): what it does or waits for, how far."""
    return msg(f"runs.stage.{stage.get('name')}", done=stage.get("done") or 0, total=stage.get("total") or "?",
               elapsed=elapsed, checkpoint=stage.get("checkpoint") or "", holder=stage.get("holder") or "")


def alert_text(msg: Msg, info: RunInfo, lang: str | None = "en") -> str:
    """Error and advice of a failed run, the story of a lost one: at the top, not in the log.
    Catalogued error / advice are shown in `lang`, other text as the worker wrote it."""

    error, advice = localize(info.error_message or info.error, lang), localize(info.advice_message or info.advice, lang)
    if info.state == "failed":
        text = msg("runs.alert.failed", error=error or msg("runs.alert.no_error"))
        return text + (f"\n\n💡 {advice}" if advice else "")
    if info.state == "lost":
        return msg("runs.alert.lost", error=error)
    # What the worker found while training stays once the run has ended: a completed run can have trained nothing.
    found = [f"⚠ {localize(info.train_warning, lang)}"] if info.train_warning else []
    if info.state == "stopped" and advice:
        return "\n\n".join([f"⏹ {advice}", *found])
    if info.state in ("queued", "running") and (info.plan_warning or info.resume_warnings):
        warnings = [info.plan_warning] if info.plan_warning else []
        return "\n\n".join([*(f"⚠ {w}" for w in warnings + [localize(w, lang) for w in info.resume_warnings]), *found])
    return "\n\n".join(found)


def can_resume(info: RunInfo) -> bool:
    return info.state in ("stopped", "lost", "failed") and bool(info.checkpoints)


def config_diff(infos: list[RunInfo]) -> tuple[list[str], list[list]]:
    """(headers, rows): the settings whose values differ between the runs."""
    configs = [i.config.to_dict() if i.config else {} for i in infos]
    keys = [k for k in (configs[0] if configs else {}) if len({repr(c.get(k)) for c in configs}) > 1]
    headers = ["setting", *[i.run_id for i in infos]]
    return headers, [[k, *[_short(c.get(k)) for c in configs]] for k in keys]


def _short(value) -> str:
    text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return text if len(text) <= 60 else text[:57] + "…"
