"""Secrets out of text before it leaves the machine (the diagnostics zip, backend/runs/diagnose.py).

Two layers, applied to every member's text in this order:
  1. known values: secrets this process can name (the API key, `--auth USER:PASS`, webhook URLs from
     settings.json, environment variables whose name holds KEY, TOKEN, SECRET or PASSWORD), replaced
     wherever they appear, so a key a library echoed into train.log goes too;
  2. shapes: `--api-key X` / `--auth X` flags, `NAME=value` and `"name": value` pairs whose name is a
     secret word, `Bearer X`, and URLs that look like they carry a token (a webhook's path);
then the home directory's path becomes `~`.

Every replacement is counted by kind, so the manifest says what was removed without repeating it.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

# Words that make a name (an environment variable, a JSON / YAML key, a flag) a secret's.
SECRET_ENV_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "auth", "webhook"})
# A traceback's "KeyError: 'lm_head'" names an exception, not a key.
NOT_SECRET_WORDS = frozenset({"error", "exception", "warning"})
# Tokenizer fields that hold a special token, not a credential ("eos_token": "<|im_end|>").
NOT_SECRET_NAMES = frozenset({"eos_token", "bos_token", "pad_token", "unk_token", "sep_token", "cls_token",
                              "mask_token"})
APP_AUTH_ENV = "FINETUNE_STUDIO_AUTH"  # app.py's --auth, as a variable (its name holds none of the words)
# A known value shorter than this is only removed where a shape names it (KEY=1 must not erase every "1").
MIN_KNOWN = {"env": 8}
MIN_KNOWN_DEFAULT = 4
HARMLESS_VALUES = frozenset({"true", "false", "null", "none", "yes", "no", "", "0", "1"})

_URL = re.compile(r"https?://[^\s\"'<>`]+")
_FLAG = re.compile(r"(--(?P<flag>[A-Za-z][A-Za-z0-9-]*)(?:=|\s+|[\"'],\s*[\"']))(?P<value>[^\s\"',\]]+)")
_PAIR = re.compile(r"(?P<lead>[\"']?(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)[\"']?\s*[:=]\s*)"
                   r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;}\])\"']+)")
_BEARER = re.compile(r"(?i)(bearer\s+)([A-Za-z0-9._~+/=-]{4,})")
# A URL path segment that looks generated: 24+ characters of a token alphabet with letters and digits
# (Slack's and Discord's webhook tokens); a model id such as SmolLM2-135M-Instruct is shorter.
_TOKEN_SEGMENT = re.compile(r"(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{24,}")
_TOKEN_QUERY = re.compile(r"(?i)(?:^|[&;])(?:[a-z_]*(?:token|key|secret|sig|signature|auth|password)[a-z_]*)=")


def name_words(name: str) -> set[str]:
    """'MY_API_KEY' -> {'my', 'api', 'key'}; 'webhookUrl' -> {'webhook', 'url'}; '--api-key' -> {'api', 'key'}."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return {w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w}


def is_secret_name(name: str) -> bool:
    words = name_words(name)
    if name.lower() in NOT_SECRET_NAMES or words & NOT_SECRET_WORDS:
        return False
    return bool(words & SECRET_WORDS)


def is_secret_env_name(name: str) -> bool:
    """A part of the name ends in KEY, TOKEN, SECRET or PASSWORD, or is its plural (HF_TOKEN, OPENAI_APIKEY,
    AWS_SECRET_ACCESS_KEY); TOKENIZERS_PARALLELISM is a setting worth keeping, not a secret."""
    parts = re.split(r"[^A-Z0-9]+", name.upper())
    return any(part.endswith(word) or part == word + "S" for part in parts for word in SECRET_ENV_WORDS)


@dataclass
class Redactor:
    """Replaces secrets in text; `counts` holds how many of each kind it removed (never the values)."""

    home: str | None = None
    known: dict[str, str] = field(default_factory=dict)   # secret value -> kind
    env_names: list[str] = field(default_factory=list)   # variables whose values were known secrets

    def add(self, value: object, kind: str) -> None:
        """Remember a secret value; its JSON-escaped form is removed too."""
        if not isinstance(value, str) or value.strip().lower() in HARMLESS_VALUES:
            return
        if len(value) < MIN_KNOWN.get(kind, MIN_KNOWN_DEFAULT):
            return
        self.known.setdefault(value, kind)
        self.known.setdefault(json.dumps(value)[1:-1], kind)

    def add_env(self, environ: Mapping[str, str]) -> None:
        for name, value in sorted(environ.items()):
            if is_secret_env_name(name):
                self.env_names.append(name)
                self.add(value, "env")
        self.add_auth(environ.get(APP_AUTH_ENV))

    def add_auth(self, value: str | None) -> None:
        """`--auth USER:PASS`: the pair and the password alone (the user name is not a secret by itself)."""
        if value:
            self.add(value, "auth")
            self.add(value.partition(":")[2], "auth")

    def add_argv(self, argv: Iterable[str]) -> None:
        """The values of secret flags in a command line (`--auth U:P`, `--api-key K`, `--hf-token=T`)."""
        argv = [str(a) for a in argv]
        for i, arg in enumerate(argv):
            flag, eq, value = arg.partition("=")
            if not flag.startswith("--") or not is_secret_name(flag[2:]):
                continue
            value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if flag == "--auth":
                self.add_auth(value)
            else:
                self.add(value, "api_key" if "key" in name_words(flag) else "flag")

    def add_settings(self, settings: object) -> None:
        """Every string under a key that names a webhook or a secret, at any depth of settings.json."""
        if isinstance(settings, dict):
            for key, value in settings.items():
                if isinstance(value, str) and is_secret_name(str(key)):
                    self.add(value, "webhook" if "webhook" in str(key).lower() else "setting")
                else:
                    self.add_settings(value)
        elif isinstance(settings, list):
            for value in settings:
                self.add_settings(value)

    def text(self, text: str, counts: Counter) -> str:
        """`text` without any secret this redactor knows or recognises; adds to `counts` by kind."""
        for value in sorted(self.known, key=len, reverse=True):  # the longest first: "u:p" before "p"
            if value in text:
                kind = self.known[value]
                counts[kind] += text.count(value)
                text = text.replace(value, f"<redacted:{kind}>")
        text = _URL.sub(lambda m: _url(m, counts), text)
        text = _FLAG.sub(lambda m: _flag(m, counts), text)
        text = _PAIR.sub(lambda m: _pair(m, counts), text)
        text = _BEARER.sub(lambda m: _count(counts, "bearer", m.group(1) + "<redacted:bearer>"), text)
        return self._home(text, counts)

    def _home(self, text: str, counts: Counter) -> str:
        for home in self._homes():
            pattern = re.compile(re.escape(home) + r"(?![A-Za-z0-9_.-])")
            text, n = pattern.subn("~", text)
            if n:
                counts["home"] += n
        return text

    def _homes(self) -> list[str]:
        if not self.home or self.home.rstrip("/") in ("", "/"):
            return []  # HOME=/ would turn every slash into ~
        homes = {self.home.rstrip("/"), os.path.realpath(self.home)}
        return sorted((h for h in homes if h.rstrip("/")), key=len, reverse=True)


def _count(counts: Counter, kind: str, replacement: str) -> str:
    counts[kind] += 1
    return replacement


def _redacted(value: str) -> bool:
    return value.strip("\"'").startswith("<redacted")


def _url(match: re.Match, counts: Counter) -> str:
    """A URL that carries a credential keeps its scheme and host only."""
    url = match.group(0)
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return _count(counts, "url", "<redacted:url>")
    secret = ("hook" in url.lower() or "@" in parts.netloc or _TOKEN_QUERY.search(parts.query)
              or any(_TOKEN_SEGMENT.fullmatch(s) for s in parts.path.split("/")))
    if not secret:
        return url
    return _count(counts, "url", f"{parts.scheme}://{host}/<redacted:url>")


def _flag(match: re.Match, counts: Counter) -> str:
    if not is_secret_name(match.group("flag")) or _redacted(match.group("value")):
        return match.group(0)
    kind = "auth" if match.group("flag") == "auth" else "flag"
    return _count(counts, kind, match.group(1) + f"<redacted:{kind}>")


def _pair(match: re.Match, counts: Counter) -> str:
    value = match.group("value")
    bare = value.strip("\"'")
    if (not is_secret_name(match.group("name")) or _redacted(value) or bare.lower() in HARMLESS_VALUES
            or _is_number(bare)):
        return match.group(0)
    quote = value[0] if value[0] in "\"'" else ""
    return _count(counts, "named", f"{match.group('lead')}{quote}<redacted:named>{quote}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def home_dir() -> str:
    """The user's home as this process sees it ($HOME first, as Path.home() on POSIX)."""
    return str(Path.home())
