"""A GRPO run's figures and sample table, from its metrics.jsonl records and
completions.jsonl samples.

Pure functions of plain lists, like ui/views/charts.py: the Runs tab's GRPO panel
keeps what it has tailed and rebuilds these from it. The metric names are
TRL's GRPOTrainer's as logged (`reward`, `rewards/<name>/mean`,
`completions/mean_length`, `kl`) plus the worker's `format_share`; a reward's
name is its preset kind or a custom function's `__name__`. Words come in
already translated (`words`); a name not in `words` is shown as it is.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from ui.views.charts import _empty, _layout, _mode, series

REWARD_PREFIX, REWARD_SUFFIX = "rewards/", "/mean"
WEIGHTED_SUM = "reward"  # TRL's name for the weighted sum of the rewards
LENGTH_KEYS = ("completions/mean_length", "completions/min_length", "completions/max_length")
# Prompts are context for the completion: cut them; a completion is shown whole up to this.
PROMPT_CHARS, COMPLETION_CHARS = 300, 2000
KEPT_STEPS = 200  # sample steps held in memory per watched run (the newest)


def reward_names(records: list[dict]) -> list[str]:
    """Names of the rewards logged on their own (`rewards/<name>/mean`), in order of first appearance."""
    names: list[str] = []
    for record in records:
        for key in record:
            if key.startswith(REWARD_PREFIX) and key.endswith(REWARD_SUFFIX):
                name = key[len(REWARD_PREFIX):-len(REWARD_SUFFIX)]
                if name and name not in names:
                    names.append(name)
    return names


def is_grpo(records: list[dict]) -> bool:
    return any(WEIGHTED_SUM in r and r.get("kind") == "train" for r in records) or bool(reward_names(records))


def reward_figure(records: list[dict], title: str, empty_note: str, words: dict[str, str]) -> go.Figure:
    """Each reward's mean (thin) and their weighted sum (thick); eval values dotted where logged."""
    fig = go.Figure()
    for name in reward_names(records):
        steps, values = series(records, f"{REWARD_PREFIX}{name}{REWARD_SUFFIX}", "train")
        if steps:
            fig.add_scatter(x=steps, y=values, mode=_mode(steps), name=words.get(name, name), line={"width": 1.5})
    steps, values = series(records, WEIGHTED_SUM, "train")
    if steps:
        fig.add_scatter(x=steps, y=values, mode=_mode(steps), name=words["weighted_sum"],
                        line={"color": "#111111", "width": 3})
    eval_steps, eval_values = series(records, f"eval_{WEIGHTED_SUM}", "eval")
    if eval_steps:
        fig.add_scatter(x=eval_steps, y=eval_values, mode="lines+markers", name=f"{words['weighted_sum']} "
                        f"({words['eval']})", line={"color": "#111111", "dash": "dot"})
    if not fig.data:
        _empty(fig, empty_note)
    return _layout(fig, title, words["step"], words["reward"])


def length_figure(records: list[dict], title: str, empty_note: str, words: dict[str, str]) -> go.Figure:
    """Mean completion length in tokens, with the shortest and longest of each step faint."""
    fig = go.Figure()
    for key, style in zip(LENGTH_KEYS, ({"width": 2.5}, {"dash": "dot", "width": 1}, {"dash": "dot", "width": 1})):
        steps, values = series(records, key, "train")
        if steps:
            fig.add_scatter(x=steps, y=values, mode=_mode(steps), name=words[key.removeprefix("completions/")],
                            line={"color": "#2ca02c", **style})
    if not fig.data:
        _empty(fig, empty_note)
    return _layout(fig, title, words["step"], words["tokens"])


def share_figure(records: list[dict], key: str, title: str, empty_note: str, words: dict[str, str]) -> go.Figure:
    """A share in [0, 1] (e.g. format_share) on a fixed 0-100% axis, so a rise reads at a glance."""
    fig = go.Figure()
    steps, values = series(records, key, "train")
    if steps:
        fig.add_scatter(x=steps, y=values, mode=_mode(steps), name=words.get(key, key), line={"color": "#9467bd"})
    else:
        _empty(fig, empty_note)
    fig = _layout(fig, title, words["step"], words.get(key, key))
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    return fig


def kl_figure(records: list[dict], title: str, empty_note: str, words: dict[str, str]) -> go.Figure:
    """KL to the reference model (TRL logs it only when beta > 0)."""
    fig = go.Figure()
    steps, values = series(records, "kl", "train")
    if steps:
        fig.add_scatter(x=steps, y=values, mode=_mode(steps), name="KL", line={"color": "#d62728"})
    else:
        _empty(fig, empty_note)
    return _layout(fig, title, words["step"], "KL")


# --- sample completions -------------------------------------------------------------------------

def text_of(value) -> str:
    """A prompt or completion as text: plain text as it is; a conversation (TRL's conversational
    format, a list of {role, content}) as its turns, one per line."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return str(value.get("content", ""))
    if isinstance(value, list):
        return "\n".join(f"{m.get('role', '')}: {m.get('content', '')}" if isinstance(m, dict) else str(m)
                         for m in value)
    return "" if value is None else str(value)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _number(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return "–"  # a reward that does not apply to this sample (TRL's None) or a torn value
    return f"{value:.3g}"


def keep_newest(samples: list[dict]) -> list[dict]:
    """`samples` without the oldest steps beyond KEPT_STEPS (a long run's file is not held whole)."""
    steps = sorted({s.get("step") for s in samples if isinstance(s.get("step"), int)})
    if len(steps) <= KEPT_STEPS:
        return samples
    first = steps[-KEPT_STEPS]
    return [s for s in samples if isinstance(s.get("step"), int) and s["step"] >= first]


def sample_steps(samples: list[dict]) -> list[int]:
    """The logging steps that have samples, newest first."""
    return sorted({s["step"] for s in samples if isinstance(s.get("step"), int)}, reverse=True)


def _rewards(sample: dict) -> dict:
    rewards = sample.get("rewards")
    return rewards if isinstance(rewards, dict) else {}


def sample_table(samples: list[dict], step: int | None, words: dict[str, str]) -> dict:
    """{"headers", "data"} of the samples of `step` (None: the newest step): prompt, completion,
    each reward on its own, the weighted sum."""
    steps = sample_steps(samples)
    step = step if step in steps else (steps[0] if steps else None)
    chosen = [s for s in samples if s.get("step") == step]
    names: list[str] = []
    for sample in chosen:
        for name in _rewards(sample):
            if name not in names:
                names.append(name)
    headers = [words["prompt"], words["completion"], *[words.get(n, n) for n in names], words["weighted_sum"]]
    rows = [[_cut(text_of(s.get("prompt")), PROMPT_CHARS), _cut(text_of(s.get("completion")), COMPLETION_CHARS),
             *[_number(_rewards(s).get(n)) for n in names], _number(s.get("reward"))] for s in chosen]
    return {"headers": headers, "data": rows or [[""] * len(headers)]}
