"""The Runs tab's GRPO panel: the rewards, completion length, format share and
KL of a GRPO run, and a table of its sample completions at each logging step.

Shown only while the watched run's stage is grpo. Its own timer tails the
run's metrics.jsonl and completions.jsonl incrementally (one GrpoWatch per
browser session, in gr.State); the figures and the table come from
ui/views/grpo_charts.py. Handlers are plain functions (tests/test_ui_grpo.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from backend.runs.files import METRICS_FILE, MetricsTail
from backend.runs.store import RunError
from ui.context import UIContext
from ui.texts.grpo_panel_texts import TEXT  # noqa: F401  (read here by the shell and the tabs)
from ui.views import grpo_charts
from ui.views.grpo_charts import keep_newest, sample_steps, sample_table

COMPLETIONS_FILE = "completions.jsonl"  # backend/training/grpo.py writes it (not imported here: it loads torch)
TICK_S = 2.0
CHART_KEYS = ("rewards", "length", "format", "kl")


WORD_KEYS = tuple(k.removeprefix("runs.grpo.word.") for k in TEXT if k.startswith("runs.grpo.word."))


@dataclass
class GrpoWatch:
    """One session's view of one GRPO run: the tails of its two files and what they gave so far."""
    run_id: str | None = None
    followed: bool = False  # run_id was looked up (a fresh watch decides on its first tick, even for no run)
    grpo: bool = False
    metrics: MetricsTail | None = None
    completions: MetricsTail | None = None
    records: list[dict] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)
    drawn: bool = False  # the panel shows this run's figures (redrawn only when a file grew)

    def follow(self, run_id: str | None, run_dir=None, grpo: bool = False) -> None:
        self.run_id, self.grpo, self.records, self.samples, self.drawn = run_id, grpo, [], [], False
        self.followed = True
        on = bool(run_id and grpo)
        self.metrics = MetricsTail(run_dir, METRICS_FILE) if on else None
        self.completions = MetricsTail(run_dir, COMPLETIONS_FILE) if on else None

    def read_new(self) -> bool:
        """Read what was appended since the last call; True when anything was."""

        if not self.metrics or not self.completions:
            return False
        records, samples = self.metrics.read_new(), self.completions.read_new()
        self.records.extend(records)
        self.samples = keep_newest(self.samples + [s for s in samples if isinstance(s, dict)])
        return bool(records or samples)


def words(ctx: UIContext, lang: str | None) -> dict[str, str]:
    return {k: ctx.msg(lang, f"runs.grpo.word.{k}") for k in WORD_KEYS}


def figures(ctx: UIContext, lang: str | None, records: list[dict]) -> list:
    def say(key: str) -> str:
        return ctx.msg(lang, f"runs.grpo.chart.{key}")

    w, empty = words(ctx, lang), say("empty")
    logged = any(r.get("kind") == "train" for r in records)
    no_format = say("no_format") if logged and not any("format_share" in r for r in records) else empty
    no_kl = say("no_kl") if logged and not any("kl" in r for r in records) else empty
    return [grpo_charts.reward_figure(records, say("rewards"), empty, w),
            grpo_charts.length_figure(records, say("length"), empty, w),
            grpo_charts.share_figure(records, "format_share", say("format"), no_format, w),
            grpo_charts.kl_figure(records, say("kl"), no_kl, w)]


def samples_view(ctx: UIContext, lang: str | None, watch: GrpoWatch | None, step) -> tuple[str, dict]:
    """(note, table) of the samples of the chosen logging step (empty: the newest)."""

    samples = watch.samples if isinstance(watch, GrpoWatch) else []
    steps = sample_steps(samples)
    table = sample_table(samples, _step(step), words(ctx, lang))
    if not steps:
        return ctx.msg(lang, "runs.grpo.no_samples"), table
    shown = _step(step) if _step(step) in steps else steps[0]
    count = sum(1 for s in samples if s.get("step") == shown)
    return ctx.msg(lang, "runs.grpo.samples_of", count=count, step=shown, newest=steps[0]), table


def _step(value) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def tick(ctx: UIContext, lang: str | None, watch: GrpoWatch | None, run_id: str | None, step) -> list:
    """[watch, panel visible, *figures, step choices, note, table]; gr.skip() where nothing changed."""
    import gradio as gr

    watch = watch if isinstance(watch, GrpoWatch) else GrpoWatch()
    unchanged = [gr.skip()] * (len(CHART_KEYS) + 3)
    if run_id != watch.run_id or not watch.followed:
        try:
            info = ctx.store.get(run_id) if run_id else None
        except RunError:
            info = None
        # The stage is fixed for a run's life: read once when the watched run changes.
        watch.follow(run_id, info.run_dir if info else None, bool(info and info.training_stage == "grpo"))
        if not watch.grpo:
            return [watch, gr.update(visible=False), *unchanged]
    elif not watch.grpo:
        return [watch, gr.skip(), *unchanged]
    if not watch.read_new() and watch.drawn:
        return [watch, gr.skip(), *unchanged]
    watch.drawn = True

    steps = [str(s) for s in sample_steps(watch.samples)]
    note, table = samples_view(ctx, lang, watch, step)
    return [watch, gr.update(visible=True), *figures(ctx, lang, watch.records),
            gr.update(choices=steps, value=step if step in steps else None), note, table]


def build(ctx: UIContext, selected) -> None:
    """The panel under the Runs tab's charts; `selected`: the watched run's dropdown."""
    import gradio as gr

    private = {"api_visibility": "private"}
    with gr.Group(visible=False, elem_id="runs-grpo") as panel:
        gr.Markdown(f"### {ctx.t('runs.grpo.title')}")
        plots = []
        for row in (("rewards", "length"), ("format", "kl")):
            with gr.Row():
                plots += [gr.Plot(label=ctx.t(f"runs.grpo.chart.{k}"), elem_id=f"runs-grpo-chart-{k}") for k in row]
        with gr.Row(equal_height=True):
            step = gr.Dropdown([], value=None, label=ctx.t("runs.grpo.step"), info=ctx.t("runs.grpo.step.info"),
                               allow_custom_value=False, scale=1, elem_id="runs-grpo-step")
            note = gr.Markdown(elem_id="runs-grpo-note")
        table = gr.Dataframe(interactive=False, wrap=True, label=ctx.t("runs.grpo.samples"), max_height=420,
                             elem_id="runs-grpo-samples")
    watch = gr.State(None)  # a GrpoWatch per session
    outputs = [watch, panel, *plots, step, note, table]
    inputs = [ctx.lang, watch, selected, step]
    selected.change(partial(tick, ctx), inputs, outputs, show_progress="hidden", trigger_mode="always_last", **private)
    ctx.timers.poll(TICK_S, partial(tick, ctx), inputs, outputs)
    step.input(partial(samples_view, ctx), [ctx.lang, watch, step], [note, table], **private)
    ctx.lang.change(partial(samples_view, ctx), [ctx.lang, watch, step], [note, table], **private)
