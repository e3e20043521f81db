"""Small render helpers shared by tabs: conversations as chat bubbles, a
token-length histogram, and the check summary table. Pure functions of plain
data (no components), so handler tests can call them directly.

Everything from user data is HTML-escaped: a dataset full of <script> tags is
shown as text, never run.
"""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go

ROLE_COLORS = {"system": "#eef2ff", "user": "#f1f5f9", "assistant": "#ecfdf5", "tool": "#fff7ed"}

CHAT_CSS = """
.ft-conv { border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 8px 10px; margin: 8px 0; }
.ft-conv-head { font-size: 0.85em; opacity: 0.75; margin-bottom: 6px; }
.ft-turn { border-radius: 8px; padding: 6px 10px; margin: 4px 0; white-space: pre-wrap; word-break: break-word;
           color: #111827; }
.ft-turn b { font-size: 0.8em; text-transform: uppercase; opacity: 0.7; display: block; }
.ft-turn.user { margin-right: 15%; } .ft-turn.assistant { margin-left: 15%; }
.ft-problem { color: #b91c1c; font-size: 0.9em; }
.ft-pair { display: flex; gap: 8px; } .ft-pair > div { flex: 1; min-width: 0; }
.ft-pair-head { font-size: 0.8em; font-weight: 600; margin-top: 4px; }
.ft-template { white-space: pre-wrap; word-break: break-word; font-family: monospace; font-size: 0.9em;
               border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 8px 10px; color: #111827; }
.ft-masked { background: #e5e7eb; } .ft-trained { background: #bbf7d0; }
"""


def conversation_html(label: str, messages: list[dict] | dict | None, notes: list[str] | None = None) -> str:
    """One row as chat bubbles; a row that could not be converted shows its problems instead.
    A preference row (a dict with prompt + chosen / rejected, or completion + label) shows its
    prompt, then its answers side by side."""
    parts = [f'<div class="ft-conv"><div class="ft-conv-head">{html.escape(label)}</div>']
    for note in notes or []:
        parts.append(f'<div class="ft-problem">{html.escape(note)}</div>')
    if isinstance(messages, dict):
        parts.append(_preference_html(messages))
    else:
        parts += [_bubble(message) for message in messages or []]
    parts.append("</div>")
    return "".join(parts)


def _bubble(message: dict) -> str:
    role = str(message.get("role", ""))
    color = ROLE_COLORS.get(role, "#f8fafc")
    return (f'<div class="ft-turn {html.escape(role)}" style="background:{color}">'
            f"<b>{html.escape(role)}</b>{html.escape(str(message.get('content', '')))}</div>")


def _preference_html(row: dict) -> str:
    prompt = "".join(_bubble(m) for m in row.get("prompt", []))
    if "chosen" in row:
        sides = [("✓ chosen", row["chosen"]), ("✗ rejected", row["rejected"])]
    else:
        sides = [("✓ desirable" if row.get("label") else "✗ undesirable", row.get("completion", []))]
    columns = "".join('<div><div class="ft-pair-head">' + html.escape(head) + "</div>"
                      + "".join(_bubble(m) for m in answer) + "</div>" for head, answer in sides)
    return prompt + '<div class="ft-pair">' + columns + "</div>"


def conversations_html(items: list[tuple[str, list[dict] | None, list[str]]], empty: str) -> str:
    if not items:
        return f"<p>{html.escape(empty)}</p>"
    return "".join(conversation_html(label, messages, notes) for label, messages, notes in items)


def token_histogram(stats: dict | None, title: str, x_label: str, y_label: str, cutoff_label: str) -> Any:
    """A plotly bar chart of token lengths with the cutoff as a dashed red line (None without stats)."""
    if not stats or not stats.get("histogram", {}).get("counts"):
        return None
    edges, counts = stats["histogram"]["edges"], stats["histogram"]["counts"]
    centers = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:])]
    widths = [b - a for a, b in zip(edges[:-1], edges[1:])]
    figure = go.Figure(go.Bar(x=centers, y=counts, width=widths, marker_color="#6366f1", name=y_label))
    cutoff = stats["cutoff_len"]
    figure.add_vline(x=cutoff, line_dash="dash", line_color="#dc2626",
                     annotation_text=f"{cutoff_label} = {cutoff}", annotation_position="top right")
    figure.update_layout(title=title, xaxis_title=x_label, yaxis_title=y_label, bargap=0.05,
                         height=320, margin={"l": 40, "r": 20, "t": 50, "b": 40}, showlegend=False)
    return figure


def template_preview_html(preview: dict, title: str, legend: str, turn_lines: list[str]) -> str:
    """One row as the trainer sees it (backend/data/template_preview.py): trained tokens green,
    masked ones grey, then one line per answer saying whether it ends with the EOS."""
    spans = "".join(f'<span class="{"ft-trained" if trained else "ft-masked"}">{html.escape(text)}</span>'
                    for text, trained in preview["pieces"])
    lines = "".join(f"<div>{html.escape(line)}</div>" for line in turn_lines)
    return (f'<div class="ft-conv ft-template-row"><div class="ft-conv-head">{html.escape(title)} · {html.escape(legend)}</div>'
            f'<div class="ft-template">{spans}</div>{lines}</div>')
