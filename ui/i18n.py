"""English / Chinese: one table of texts for the whole UI, and the language switch.

How gradio 6.31 picks the language: the page translates `gr.I18n` keys in the
browser with svelte-i18n, starting from `navigator.language`; the footer's
Settings panel changes it by calling `changeLocale` exported by the frontend's
`core-*.js` module. The shell's visible switch calls that same function: it
imports the very module URL the page already loaded (found in the page's
resource timings), so it gets the same module instance and the same locale
store. Chinese is set as "zh-CN": gradio's own words (the upload area's
"Drop File Here", "Click to Upload") are in its "zh-CN" table, and svelte-i18n
looks a key up in "zh-CN", then "zh" (where gr.I18n keeps ours), then "en";
set as "zh", gradio's own words fell back to English. Messages made by Python
handlers do not go through the browser; they take the switch's value ("en" /
"zh") as an input and use `UIContext.msg`.
"""

from __future__ import annotations

from typing import Any

from backend.messages import CATALOGUE, message_of, render_message
from ui.texts.message_texts import ZH

LANGUAGES = ("en", "zh")

# Runs in the browser with the switch's value; returns it so a Python handler
# chained after it still receives the language.
APPLY_LANGUAGE_JS = """
(lang) => {
  const names = performance.getEntriesByType("resource").map((e) => e.name)
    .concat(Array.from(document.querySelectorAll("link[rel=modulepreload], script[src]"),
                       (e) => e.href || e.src));
  const core = names.find((n) => /\\/assets\\/core-[\\w-]+\\.js$/.test(n));
  if (core) {
    import(core).then((m) => m.changeLocale && m.changeLocale(lang === "zh" ? "zh-CN" : lang));
  }
  document.documentElement.setAttribute("lang", lang);
  return lang;
}
"""

# The browser's own language, as the default before the user picks one.
BROWSER_LANGUAGE_JS = """
(lang) => ((navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en")
"""


def check_texts(texts: dict[str, dict[str, str]]) -> None:
    """Every key must have a non-empty text in every language: fail at start-up, not in front of a user."""
    missing = [f"{key}:{lang}" for key, entry in texts.items() for lang in LANGUAGES if not entry.get(lang)]
    if missing:
        raise ValueError("UI texts without a translation: " + ", ".join(sorted(missing)))


def merge_texts(*tables: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """One table from the shell's and every tab's TEXT; a key defined twice is a bug."""
    merged: dict[str, dict[str, str]] = {}
    for table in tables:
        clash = merged.keys() & table.keys()
        if clash:
            raise ValueError("UI text keys defined twice: " + ", ".join(sorted(clash)))
        merged.update(table)
    check_texts(merged)
    return merged


def build_i18n(texts: dict[str, dict[str, str]]) -> Any:
    import gradio as gr

    return gr.I18n(**{lang: {key: entry[lang] for key, entry in texts.items()} for lang in LANGUAGES})


def normalise_language(value: Any) -> str:
    """'zh', 'zh-CN', 'en-US' ... -> one of LANGUAGES (English when unknown)."""
    text = str(value or "").lower()
    return "zh" if text.startswith("zh") else "en"


def localize(value: Any, lang: str | None) -> str:
    """A backend Message, an error carrying one, or plain text, in `lang`.

    Catalogued messages (backend/messages.py) are rendered from
    ui/texts/message_texts.py in Chinese; plain text (a library's own words) stays
    as it is."""

    table = ZH if normalise_language(lang) == "zh" else CATALOGUE
    localized = getattr(value, "localized", None)  # a DataError: file, where, problem and hint
    if callable(localized):
        return localized(lambda part: part if isinstance(part, str) else render_message(part, table))
    message = message_of(value)
    if message is None:
        return str(value) if value is not None else ""
    return render_message(message, table)
