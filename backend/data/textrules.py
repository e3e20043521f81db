"""Text patterns shared by the checks (which find) and the fixes (which repair),
so a fix removes exactly what its check reports."""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata

HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
HTML_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{1,9}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")
HTML_ANY = re.compile(f"{HTML_TAG.pattern}|{HTML_ENTITY.pattern}")
# C0 / C1 controls except tab, newline and carriage return; zero-width characters and
# the BOM; the U+FFFD replacement character; lone surrogates (paired ones decode to one char).
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u2060\ufeff\ufffd\ud800-\udfff]")
PLACEHOLDER = re.compile(r"\{\{\s*([^{}\s][^{}]{0,40}?)\s*\}\}")
# CJK ideographs, kana and hangul; Latin letters with their accented forms.
CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
LATIN = re.compile("[A-Za-z\u00c0-\u024f]+")
FOLD_DROP = re.compile(r"[\W_]+")
# ASCII fast paths (most rows): bytes.translate runs in C at memory speed.
ASCII_NOT_ALNUM = bytes(b for b in range(128) if not chr(b).isalnum())
ASCII_NOT_ALPHA = bytes(b for b in range(128) if not chr(b).isalpha())
# A CJK character carries about as much text as 3 Latin letters (a short word).
CJK_WEIGHT = 3
def html_found(text: str) -> str | None:
    m = HTML_ANY.search(text)
    return m.group(0)[:40] if m else None


def strip_html(text: str) -> str:
    return html.unescape(HTML_TAG.sub("", text))


def control_found(text: str) -> str | None:
    m = CONTROL.search(text)
    return f"U+{ord(m.group(0)):04X}" if m else None


def remove_control(text: str) -> str:
    return CONTROL.sub("", text)


def placeholders(text: str) -> list[str]:
    return PLACEHOLDER.findall(text)


def fill_placeholders(text: str, values: dict[str, str]) -> str:
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def normalize(text: str) -> str:
    """NFC; NBSP -> space; CRLF -> LF; no trailing spaces on lines; at most one blank line; trimmed ends.
    Leading indentation is kept (code blocks)."""
    text = unicodedata.normalize("NFC", text).replace("\u00a0", " ").replace("\r\n", "\n").replace("\r", "\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def fold(text: str) -> str:
    """Case, whitespace and punctuation folded away (NFKC first): the near-duplicate key text."""
    return _fold_bytes(text).decode("utf-8", "surrogatepass")


def _fold_bytes(text: str) -> bytes:
    if text.isascii():  # same result as below for ASCII: keep [a-z0-9] only
        return text.encode().lower().translate(None, ASCII_NOT_ALNUM)
    return FOLD_DROP.sub("", unicodedata.normalize("NFKC", text).casefold()).encode("utf-8", "surrogatepass")


def row_key(messages: list[dict], folded: bool = False) -> bytes:
    """8-byte digest of a conversation (roles included): the duplicate key."""
    h = hashlib.blake2b(digest_size=8)
    for m in messages:
        h.update(m["role"].encode())
        h.update(b"\x1f")
        h.update(_fold_bytes(m["content"]) if folded else m["content"].encode("utf-8", "surrogatepass"))
        h.update(b"\x1e")
    return h.digest()


def script_counts(text: str) -> tuple[int, int]:
    """(CJK characters x CJK_WEIGHT, Latin letters) in `text`."""
    if text.isascii():
        return 0, len(text.encode().translate(None, ASCII_NOT_ALPHA))
    return sum(map(len, CJK.findall(text))) * CJK_WEIGHT, sum(map(len, LATIN.findall(text)))


def script_of(counts: tuple[int, int]) -> str:
    """'cjk', 'latin' or 'none': the dominant script of some letters."""
    cjk, latin = counts
    if not cjk and not latin:
        return "none"
    return "cjk" if cjk >= latin else "latin"


def prompt_and_response(messages: list[dict]) -> tuple[list[dict], str]:
    """Everything before the last assistant turn, and that turn's text."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "assistant":
            return messages[:i], messages[i]["content"]
    return messages, ""


# Preference rows (pairs and KTO rows): the answers their checks and fixes look at, and their text.
def answers_of(row: dict) -> list[list[dict]]:
    return [row["chosen"], row["rejected"]] if "chosen" in row else [row["completion"]]


def text_of(messages: list[dict]) -> str:
    return "\n".join(m["content"] for m in messages)
