"""Plotly figures built from metrics.jsonl records (docs/CONTRACTS.md, metrics.jsonl lines).

Pure functions of a list of records: the Runs tab keeps the records it has
tailed so far and rebuilds the figures from them, never from the file.
Titles come in already translated.
"""

from __future__ import annotations

import plotly.graph_objects as go

# TensorBoard's default smoothing weight.
SMOOTHING = 0.6
# Below this many points a line gets markers too: one logged step must show.
MARKERS_BELOW = 30
MEMORY_KEYS_ORDER = ("memory_allocated_gb", "memory_reserved_gb", "memory_rss_gb")


def smooth(values: list[float], weight: float = SMOOTHING) -> list[float]:
    """Exponential moving average with TensorBoard's debiasing, so the first
    points are not pulled towards zero."""
    out, last, norm = [], 0.0, 0.0
    for value in values:
        last = last * weight + (1 - weight) * value
        norm = norm * weight + (1 - weight)
        out.append(last / norm)
    return out


def series(records: list[dict], key: str, kind: str | None = None, x: str = "step") -> tuple[list, list]:
    """(x values, y values) of every record that has `key` (and the given kind)."""
    xs, ys = [], []
    for record in records:
        value = record.get(key)
        if value is None or (kind and record.get("kind") != kind):
            continue
        xs.append(record.get(x))
        ys.append(value)
    return xs, ys


def _mode(xs: list) -> str:
    return "lines+markers" if len(xs) < MARKERS_BELOW else "lines"


# Legend and axis words, English; the tabs pass their translation (runs.word.* in ui/tabs/runs.py).
WORDS = {"step": "step", "loss": "loss", "train_loss": "train loss", "train_loss_smoothed": "train loss (smoothed)",
         "eval_loss": "eval loss", "minutes": "minutes", "norm": "norm", "train": "train", "eval": "eval",
         "learning_rate": "learning rate", "grad_norm": "gradient norm", "tokens_per_second": "tokens / s",
         "allocated": "allocated", "reserved": "reserved", "rss": "rss", "attn": "attn", "mlp": "mlp"}


def _words(words: dict[str, str] | None) -> dict[str, str]:
    return {**WORDS, **(words or {})}


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str = "") -> go.Figure:
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title=y_title, height=300,
                      margin={"l": 50, "r": 20, "t": 40, "b": 40}, template="plotly_white",
                      legend={"orientation": "h", "y": -0.25})
    return fig


def _empty(fig: go.Figure, note: str) -> go.Figure:
    fig.add_annotation(text=note, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


def loss_figure(records: list[dict], title: str = "Loss", empty_note: str = "No data yet",
                words: dict[str, str] | None = None) -> go.Figure:
    """Train loss raw (faint) and smoothed, eval loss on the same axes."""
    w, fig = _words(words), go.Figure()
    steps, losses = series(records, "loss", "train")
    if steps:
        fig.add_scatter(x=steps, y=losses, mode=_mode(steps), name=w["train_loss"], opacity=0.3,
                        line={"color": "#1f77b4"})
        fig.add_scatter(x=steps, y=smooth(losses), mode=_mode(steps), name=w["train_loss_smoothed"],
                        line={"color": "#1f77b4", "width": 2.5})
    eval_steps, eval_losses = series(records, "eval_loss")
    if eval_steps:
        fig.add_scatter(x=eval_steps, y=eval_losses, mode="lines+markers", name=w["eval_loss"],
                        line={"color": "#d62728"})
    if not steps and not eval_steps:
        _empty(fig, empty_note)
    return _layout(fig, title, w["step"], w["loss"])


def line_figure(records: list[dict], key: str, title: str, empty_note: str = "No data yet",
                kind: str | None = "train", log_y: bool = False, words: dict[str, str] | None = None) -> go.Figure:
    w, fig = _words(words), go.Figure()
    steps, values = series(records, key, kind)
    if steps:
        fig.add_scatter(x=steps, y=values, mode=_mode(steps), name=w.get(key, key))
    else:
        _empty(fig, empty_note)
    if log_y:
        fig.update_yaxes(type="log")
    return _layout(fig, title, w["step"], w.get(key, key))


def memory_figure(records: list[dict], title: str = "Memory (GiB)", empty_note: str = "No data yet",
                  words: dict[str, str] | None = None) -> go.Figure:
    """Every memory_*_gb number the worker logged, against minutes since the first record."""
    w, fig = _words(words), go.Figure()
    start = next((r["time"] for r in records if "time" in r), None)
    keys = sorted({k for r in records for k in r if k.startswith("memory_") and k.endswith("_gb")},
                  key=lambda k: (MEMORY_KEYS_ORDER.index(k) if k in MEMORY_KEYS_ORDER else 99, k))
    for key in keys:
        points = [((r["time"] - start) / 60, r[key]) for r in records if r.get(key) is not None and "time" in r]
        name = key.removeprefix("memory_").removesuffix("_gb")
        fig.add_scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode=_mode(points),
                        name=w.get(name, name))
    if not keys:
        _empty(fig, empty_note)
    return _layout(fig, title, w["minutes"], "GiB")


def grad_norm_matrix(records: list[dict]) -> tuple[list[int], list[str], list[list[float | None]]]:
    """(steps, row labels, rows) of per-layer gradient norms: one row per
    attention / MLP block of each layer, one column per logged step."""
    logged = [r for r in records if isinstance(r.get("grad_norms"), dict)]
    layers = max((len(r["grad_norms"].get(part) or []) for r in logged for part in ("attn", "mlp")), default=0)
    labels = [f"{part} {i}" for part in ("attn", "mlp") for i in range(layers)]
    rows: list[list[float | None]] = [[] for _ in labels]
    for record in logged:
        norms = record["grad_norms"]
        for p, part in enumerate(("attn", "mlp")):
            values = norms.get(part) or []
            for i in range(layers):
                rows[p * layers + i].append(values[i] if i < len(values) else None)
    return [r.get("step") for r in logged], labels, rows


def grad_heatmap(records: list[dict], title: str = "Gradient norm per layer",
                 empty_note: str = "No data yet", words: dict[str, str] | None = None) -> go.Figure:
    steps, labels, rows = grad_norm_matrix(records)
    w, fig = _words(words), go.Figure()
    labels = [f"{w[part]} {index}" for part, index in (label.split(" ") for label in labels)]  # "attn 0" in words
    if steps and labels:
        fig.add_heatmap(x=steps, y=labels, z=rows, colorscale="Viridis", colorbar={"title": w["norm"]})
    else:
        _empty(fig, empty_note)
    fig = _layout(fig, title, w["step"])
    fig.update_layout(height=max(300, 40 + 18 * len(labels)))
    return fig


def compare_figure(runs: dict[str, list[dict]], title: str = "Compare", empty_note: str = "No data yet",
                   words: dict[str, str] | None = None) -> go.Figure:
    """Smoothed train loss (solid) and eval loss (dotted) of several runs, one colour each."""
    palette = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
    w, fig = _words(words), go.Figure()
    for n, (label, records) in enumerate(runs.items()):
        color = palette[n % len(palette)]
        steps, losses = series(records, "loss", "train")
        if steps:
            fig.add_scatter(x=steps, y=smooth(losses), mode=_mode(steps), name=f"{label} {w['train']}",
                            line={"color": color})
        eval_steps, eval_losses = series(records, "eval_loss")
        if eval_steps:
            fig.add_scatter(x=eval_steps, y=eval_losses, mode="lines+markers", name=f"{label} {w['eval']}",
                            line={"color": color, "dash": "dot"})
    if not fig.data:
        _empty(fig, empty_note)
    return _layout(fig, title, w["step"], w["loss"])


PREFERENCE_REWARDS = ("rewards/chosen", "rewards/rejected", "rewards/margins")


def preference_figure(records: list[dict], keys: tuple[str, ...], title: str, empty_note: str = "No data yet",
                      y_title: str = "", words: dict[str, str] | None = None) -> go.Figure:
    """Preference stages: the train series of `keys` and their eval_ versions (dotted), TRL's names."""
    w, fig = _words(words), go.Figure()
    for key in keys:
        steps, values = series(records, key, "train")
        if steps:
            fig.add_scatter(x=steps, y=values, mode=_mode(steps), name=w.get(key, key))
        eval_steps, eval_values = series(records, f"eval_{key}", "eval")
        if eval_steps:
            fig.add_scatter(x=eval_steps, y=eval_values, mode="lines+markers", name=f"{w['eval']} {w.get(key, key)}",
                            line={"dash": "dot"})
    if not fig.data:
        _empty(fig, empty_note)
    return _layout(fig, title, w["step"], y_title)


LEARNING_LINES = (("learned", "#2ca02c"), ("kept", "#1f77b4"), ("ended", "#7f7f7f"))


def learning_figure(rows: list[dict], title: str, empty_note: str = "No data yet",
                    words: dict[str, str] | None = None) -> go.Figure:
    """The learning report's shares (0-100 %) against the step: learned, kept, ended
    (backend/learning/entries.py summary_rows; the base at step 0 has no "kept")."""
    w, fig = {**_words(words), **(words or {})}, go.Figure()
    for key, color in LEARNING_LINES:
        points = [(r["step"], 100 * r[key], r["checkpoint"]) for r in rows if r.get(key) is not None]
        if points:
            fig.add_scatter(x=[p[0] for p in points], y=[p[1] for p in points], text=[p[2] for p in points],
                            mode="lines+markers", name=w.get(key, key), line={"color": color},
                            hovertemplate="%{text}: %{y:.0f}%<extra></extra>")
    if not rows:
        _empty(fig, empty_note)
    fig.update_yaxes(range=[0, 105])
    return _layout(fig, title, w["step"], "%")
