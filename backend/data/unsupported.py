"""Data the app can read but cannot train on, told apart from a broken row.

* Media. LLaMA-Factory's multimodal rows carry `images`, `videos` or `audios`
  columns (paths) and `<image>` / `<video>` / `<audio>` placeholders in their
  text. The app trains text-only models: the media would be dropped and the
  placeholder trained on as literal text, so such a row is a row problem.
  LLaMA-Factory treats the placeholders as media tokens even without a media
  column (it refuses a count that does not match), so they are refused too.
* Pretraining text. Rows with only a document (`{"text": ...}`, LLaMA-Factory's
  `columns: {prompt: text}` with no response) hold no answer to learn.
"""

from __future__ import annotations

import re

from backend.messages import Message, msg

# LLaMA-Factory's media columns and the placeholder each one's items stand for in the text.
MEDIA_COLUMNS = {"images": "<image>", "videos": "<video>", "audios": "<audio>"}
PLACEHOLDER = re.compile(r"<(image|video|audio)>")


def media_in_row(raw: dict) -> tuple[str, Message] | None:
    """(column, problem) for the first non-empty media column of a raw record, else None."""
    for column in MEDIA_COLUMNS:
        value = raw.get(column)
        if value:
            count = len(value) if isinstance(value, list) else 1
            return column, msg("row.media", count=count, column=column)
    return None


def placeholder_in(texts) -> Message | None:
    """The problem for the first text that holds a media placeholder, else None."""
    for text in texts:
        found = PLACEHOLDER.search(text or "")
        if found:
            return msg("row.media_placeholder", placeholder=found.group(0))
    return None


def media_columns(columns: dict) -> list[str]:
    """The media columns a dataset_info.json entry names (`columns: {images: ..., videos: ...}`)."""
    return [key for key in MEDIA_COLUMNS if columns.get(key)]


def is_pretraining_text(first: dict) -> bool:
    """A record whose only text is a `text` document (LLaMA-Factory's pretraining rows, c4 and the like)."""
    texts = [key for key, value in first.items() if isinstance(value, str)]
    return texts == ["text"]
