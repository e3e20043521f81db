"""The judge endpoint: any OpenAI-compatible chat-completions server (this
project's `python -m backend.serve`, Ollama, llama.cpp, vLLM, a hosted API),
called through the `openai` package. Greedy (temperature 0) so a verdict is
repeatable and the cache is honest. Each refusal is a sentence that says
what to check: no answer on the URL, a timeout, a wrong key, a wrong model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from backend.messages import UserError, msg

if TYPE_CHECKING:
    import openai

DEFAULT_TIMEOUT_S = 120.0  # a CPU judge answering 256 tokens takes tens of seconds
DEFAULT_MAX_TOKENS = 256
NO_KEY = "no-key"  # the openai client insists on a key; servers without one ignore it


class JudgeError(UserError, RuntimeError):
    """The judge cannot be asked; the message names the endpoint and what to do."""


@dataclass(frozen=True)
class JudgeEndpoint:
    url: str  # the base URL, e.g. http://127.0.0.1:8000/v1 (a URL without /v1 gets it)
    model: str
    api_key: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_tokens: int = DEFAULT_MAX_TOKENS

    @property
    def base_url(self) -> str:
        url = self.url.rstrip("/")
        return url if url.endswith("/v1") else url + "/v1"

    @property
    def identity(self) -> str:
        """What the cache keys on: the server and the model (never the key)."""
        return f"{self.base_url} {self.model}"


class JudgeClient:
    def __init__(self, endpoint: JudgeEndpoint):
        if not endpoint.url.startswith(("http://", "https://")):
            raise JudgeError(msg("judge.bad_url", url=endpoint.url))
        if not endpoint.model.strip():
            raise JudgeError(msg("judge.no_model"))
        import openai  # 0.6 s: paid by a judgement, not by every `python -m backend.evaluate` or the app's start

        self.endpoint = endpoint
        # max_retries=0: a refused port or a wrong key is reported at once, not after a minute of retries.
        self._client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key or NO_KEY,
                                     timeout=endpoint.timeout_s, max_retries=0)

    def ask(self, prompt: str) -> str:
        """The judge's answer to one user message."""
        import openai

        where = {"url": self.endpoint.base_url, "model": self.endpoint.model}
        try:
            reply = self._client.chat.completions.create(
                model=self.endpoint.model, messages=[{"role": "user", "content": prompt}],
                temperature=0.0, max_tokens=self.endpoint.max_tokens)
        except openai.APITimeoutError:
            raise JudgeError(msg("judge.timeout", seconds=self.endpoint.timeout_s, **where)) from None
        except openai.APIConnectionError as error:
            raise JudgeError(msg("judge.unreachable", error=_cause(error), **where)) from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
            raise JudgeError(msg("judge.bad_key", status=error.status_code, **where)) from None
        except openai.NotFoundError as error:
            raise JudgeError(msg("judge.not_found", error=_detail(error), **where)) from None
        except openai.APIStatusError as error:
            raise JudgeError(msg("judge.http_error", status=error.status_code, error=_detail(error), **where)) from None
        except openai.APIError as error:  # a body that is not a chat completion
            raise JudgeError(msg("judge.bad_reply", error=error, **where)) from None
        if not reply.choices:
            raise JudgeError(msg("judge.bad_reply", error="no choices in the reply", **where))
        return reply.choices[0].message.content or ""


def _cause(error: Exception) -> str:
    cause = error.__cause__ or error
    while cause.__cause__ is not None and len(str(cause)) == 0:
        cause = cause.__cause__
    return str(cause) or type(cause).__name__


def _detail(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        return str(inner.get("message", inner) if isinstance(inner, dict) else inner)[:300]
    return str(error.message)[:300]
