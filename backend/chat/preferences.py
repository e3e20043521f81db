"""Blind comparisons: the column order shuffled per prompt, and the votes kept
per run in RUN_DIR/preferences.json, so checkpoints can be ranked by what a
person preferred, not only by loss.

File format: {"votes": [{"time", "prompt", "candidates": [key...], "winner": key | "tie",
                         "answers": {key: text}, "contexts": {key: [messages before that answer]}}],
              "tally": {key: {"wins": int, "shown": int}}}
where a key is "base", "checkpoint-<step>", "final", or "<other-run>/<name>"
for a checkpoint of another run that was in the same comparison. Each column
keeps its own conversation, so after the first turn the contexts differ: an
answer was generated after its own column's earlier answers, not the winner's.
`answers` and `contexts` let backend/chat/vote_data.py turn votes into
chosen-rejected pairs; votes without answers are skipped there, and votes of
an earlier format hold one `context` (the winner's) instead of `contexts`.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

from backend.storage.atomic_files import atomic_write_json, read_json

PREFERENCES_FILE = "preferences.json"
# Only the start of the prompt is kept with a vote: enough to recognise it.
PROMPT_CHARS = 200
TIE = "tie"


def blind_order(count: int, seed: int) -> list[int]:
    """A shuffled order of `count` columns, the same for the same seed."""
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return order


def blind_letter(position: int) -> str:
    return "ABCDE"[position] if position < 5 else str(position + 1)


def read_preferences(run_dir: Path) -> dict:
    data = read_json(Path(run_dir) / PREFERENCES_FILE, default=None)
    if not isinstance(data, dict):
        data = {}
    data.setdefault("votes", [])
    data.setdefault("tally", {})
    return data


def local_key(key: str, run_id: str) -> str:
    """A target key as seen from inside `run_id`'s own file: its own checkpoints lose the run prefix."""
    prefix = f"{run_id}/"
    return key[len(prefix):] if key.startswith(prefix) else key


class PreferenceStore:
    """Records votes; one lock per store so two votes never interleave a read-modify-write."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def record(self, run_dirs: list[Path], candidates: list[str], winner: str, prompt: str,
               answers: dict[str, str] | None = None, contexts: dict[str, list[dict]] | None = None) -> None:
        """Add one vote to every run that had a checkpoint in the comparison.
        `winner` is a candidate key or TIE; `answers` maps candidate keys to the text shown,
        `contexts` to the conversation each answer followed (the prompt alone when not given)."""
        if winner not in candidates and winner != TIE:
            raise ValueError(f"The vote names {winner!r}, which was not one of the answers shown.")
        with self._lock:
            for run_dir in run_dirs:
                run_id = Path(run_dir).name
                shown = [local_key(key, run_id) for key in candidates]
                data = read_preferences(run_dir)
                vote = {"time": time.time(), "prompt": prompt[:PROMPT_CHARS],
                        "candidates": shown, "winner": local_key(winner, run_id)}
                if answers is not None:
                    first_turn = [{"role": "user", "content": prompt}]
                    vote["answers"] = {local_key(k, run_id): v for k, v in answers.items()}
                    vote["contexts"] = {local_key(k, run_id): list((contexts or {}).get(k) or first_turn)
                                        for k in answers}
                data["votes"].append(vote)
                for key in shown:
                    entry = data["tally"].setdefault(key, {"wins": 0, "shown": 0})
                    entry["shown"] += 1
                    entry["wins"] += key == local_key(winner, run_id)
                atomic_write_json(Path(run_dir) / PREFERENCES_FILE, data)


def tally_rows(run_dir: Path) -> list[list]:
    """[key, wins, shown, win rate %] per checkpoint, most preferred first."""
    tally = read_preferences(run_dir)["tally"]
    rows = [[key, v["wins"], v["shown"], round(100 * v["wins"] / v["shown"], 1) if v["shown"] else 0.0]
            for key, v in tally.items()]
    return sorted(rows, key=lambda row: (-row[3], -row[1], row[0]))
