"""OpenAI request bodies -> checked plain values. Every refusal is an ApiError
that names the field (OpenAI's `param`) and says what to send instead.

Unknown fields are ignored (clients send `user`, `metadata`, `store` ...);
fields that would change the answer and that this server cannot honour
(n > 1, tools, penalties, logit_bias) are refused, never dropped. Log-
probabilities are OpenAI's two dialects: `logprobs: N` (+ `echo`) on
/v1/completions, `logprobs: true` + `top_logprobs: N` on /v1/chat/completions.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
MAX_STOP_STRINGS = 4
# Sampling divides the logits by the temperature: below this they overflow to inf and sampling
# fails; 0 (greedy) is what a client means by a temperature this small.
MIN_TEMPERATURE = 0.01
# torch.manual_seed takes a 64-bit integer.
SEED_RANGE = (-(1 << 63), (1 << 63) - 1)
# Alternatives per token a request may ask for (OpenAI's chat maximum; vLLM's default max_logprobs).
MAX_TOP_LOGPROBS = 20
# Prompts in one /v1/completions request (lm-eval sends its --batch_size in one list).
MAX_PROMPTS = 256


@dataclass(eq=False)   # eq would make it unhashable, and exceptions must hash
class ApiError(Exception):
    """An answer in OpenAI's error shape: {"error": {"message", "type", "param", "code"}}."""
    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None
    headers: dict = field(default_factory=dict)

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad(param: str, message: str, code: str = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


@dataclass
class Sampling:
    temperature: float = 1.0        # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0                  # 0 = off (vLLM extension)
    repetition_penalty: float = 1.0  # vLLM extension
    max_tokens: int | None = None   # None = what the context leaves, up to the server default
    stop: tuple[str, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False        # vLLM extension: generate exactly max_tokens


@dataclass
class Request:
    kind: str                       # "chat" | "completion"
    model: str
    messages: list[dict] | None     # chat: [{"role", "content": str}]
    prompt: str | list[int] | None  # completion: text or token ids
    sampling: Sampling
    stream: bool = False
    include_usage: bool = False
    prompts: list = field(default_factory=list)   # completion: every prompt, one choice each (prompt = the first)
    logprobs: int | None = None     # alternatives per token (0 = the chosen token's own only); None = not asked
    echo: bool = False              # completion: the prompt's tokens (and their log-probabilities) come back too

    @property
    def per_token(self) -> bool:
        """Answered token by token (backend/serve/scored.py): log-probabilities, echo or several prompts."""
        return self.logprobs is not None or self.echo or len(self.prompts) > 1


def parse_body(raw: bytes) -> dict:
    try:
        body = json.loads(raw)
    except UnicodeDecodeError:
        raise bad("body", "The request body is not UTF-8 text: send JSON.", "invalid_json") from None
    except RecursionError:   # the parser's own nesting limit (about 1,000 levels), not a server failure
        raise bad("body", "The request body nests lists or objects too deeply: send a flat chat request "
                          "(messages of role and content).", "invalid_json") from None
    except ValueError as error:
        raise bad("body", f"The request body is not valid JSON ({error}): send one JSON object.", "invalid_json") from None
    if not isinstance(body, dict):
        raise bad("body", f"The request body must be a JSON object, not {_kind(body)}.", "invalid_json")
    return body


def chat_request(body: dict) -> Request:
    _refuse_unsupported(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad("messages", "'messages' is required: a non-empty list of {\"role\", \"content\"} objects.",
                  "missing_required_parameter" if messages is None else "invalid_value")
    if body.get("echo") not in (None, False):
        raise bad("echo", "'echo' is a /v1/completions field: to score a prompt's own tokens send it there as "
                          "'prompt' with \"echo\": true and \"max_tokens\": 0.", "unsupported_parameter")
    parsed = [_message(i, m) for i, m in enumerate(messages)]
    sampling = _sampling(body)
    if sampling.max_tokens == 0:
        raise bad(_max_tokens_name(body), "'max_tokens' 0 asks for no answer, which a chat completion cannot "
                                          "give: send at least 1 (scoring a prompt without an answer is "
                                          "/v1/completions with \"echo\": true).")
    request = Request("chat", _model(body), parsed, None, sampling, *_stream(body), logprobs=_chat_logprobs(body))
    return _checked_stream(request)


def completion_request(body: dict) -> Request:
    _refuse_unsupported(body)
    for name, allowed in (("suffix", (None, "")), ("best_of", (None, 1))):
        if body.get(name) not in allowed:
            raise bad(name, f"'{name}' is not supported by this server: leave it out.", "unsupported_parameter")
    if body.get("top_logprobs") is not None:
        raise bad("top_logprobs", "'top_logprobs' is a /v1/chat/completions field: on /v1/completions send "
                                  "\"logprobs\": N (the number of alternatives per token) instead.",
                  "unsupported_parameter")
    prompts = _prompts(body.get("prompt"))
    echo = _boolean(body, "echo", False)
    sampling = _sampling(body)
    if sampling.max_tokens == 0 and not echo:
        raise bad(_max_tokens_name(body), "'max_tokens' 0 without \"echo\": true returns nothing: send at least "
                                          "1, or \"echo\": true to score the prompt itself.")
    request = Request("completion", _model(body), None, prompts[0], sampling, *_stream(body), prompts=prompts,
                      logprobs=_completion_logprobs(body), echo=echo)
    return _checked_stream(request)


def _chat_logprobs(body: dict) -> int | None:
    """Chat's dialect: "logprobs": true, then "top_logprobs": 0..MAX alternatives per token."""
    if body.get("logprobs") is not None and not isinstance(body.get("logprobs"), bool):
        raise bad("logprobs", f"'logprobs' on /v1/chat/completions is true or false (got "
                              f"{json.dumps(body.get('logprobs'))}): send \"logprobs\": true with "
                              "\"top_logprobs\": N for N alternatives per token (a number is /v1/completions' "
                              "spelling).")
    logprobs = bool(body.get("logprobs"))
    top = body.get("top_logprobs")
    if top is not None and not logprobs:
        raise bad("top_logprobs", "'top_logprobs' is only allowed with \"logprobs\": true: add it, or leave "
                                  "'top_logprobs' out.")
    if not logprobs:
        return None
    return _top_count(body, "top_logprobs", "on /v1/chat/completions", 0)


def _completion_logprobs(body: dict) -> int | None:
    """Completions' dialect: "logprobs": N, the chosen token's log-probability plus its N most likely
    alternatives (0: the chosen token's only). `false` and null ask for none."""
    value = body.get("logprobs")
    if value is None or value is False:
        return None
    if value is True:
        raise bad("logprobs", "'logprobs' on /v1/completions is a number of alternatives per token (0 to "
                              f"{MAX_TOP_LOGPROBS}), not true: send e.g. \"logprobs\": 1 (true is the chat "
                              "endpoint's spelling).")
    return _top_count(body, "logprobs", "on /v1/completions", None)


def _top_count(body: dict, name: str, where: str, default: int | None) -> int | None:
    """A number of alternatives per token: a whole number from 0 to MAX_TOP_LOGPROBS."""
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(name, f"'{name}' {where} must be a whole number from 0 to {MAX_TOP_LOGPROBS} (alternatives per "
                        f"token), not {json.dumps(value)}.")
    if value < 0:
        raise bad(name, f"'{name}' must be 0 or more (got {value}): 0 returns the chosen tokens' own "
                        "log-probabilities only.")
    if value > MAX_TOP_LOGPROBS:
        raise bad(name, f"'{name}' asks for {value} alternatives per token; this server returns at most "
                        f"{MAX_TOP_LOGPROBS}: send {MAX_TOP_LOGPROBS} or fewer.")
    return value


def _checked_stream(request: Request) -> Request:
    if request.stream and request.per_token:
        what = ("log-probabilities" if request.logprobs is not None else
                "'echo'" if request.echo else f"{len(request.prompts)} prompts")
        raise bad("stream", f"Streaming is not served with {what}: send \"stream\": false (the whole answer "
                            "comes at once), or stream one prompt without log-probabilities.",
                  "unsupported_parameter")
    return request


def _max_tokens_name(body: dict) -> str:
    return "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"


def _model(body: dict) -> str:
    model = body.get("model")
    if model is None:
        raise bad("model", "'model' is required: one of the names GET /v1/models lists.", "missing_required_parameter")
    if not isinstance(model, str) or not model.strip():
        raise bad("model", f"'model' must be a non-empty string, not {_kind(model)}.")
    return _text("model", model)


def _message(index: int, message) -> dict:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise bad(where, f"{where} must be an object with 'role' and 'content', not {_kind(message)}.")
    role = message.get("role")
    if role not in ROLES:
        raise bad(f"{where}.role", f"{where}.role must be one of {', '.join(ROLES)} (got {role!r}); "
                                   "tool messages are not supported by this server.")
    content = message.get("content")
    if content is None and role == "assistant":
        content = ""
    if isinstance(content, list):
        content = "".join(_text_part(f"{where}.content[{i}]", part) for i, part in enumerate(content))
    if not isinstance(content, str):
        raise bad(f"{where}.content", f"{where}.content must be a string or a list of text parts, not {_kind(content)}.")
    return {"role": ROLES[role], "content": _text(f"{where}.content", content)}


def _text_part(where: str, part) -> str:
    if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
        kind = part.get("type") if isinstance(part, dict) else _kind(part)
        raise bad(where, f"{where} must be {{\"type\": \"text\", \"text\": ...}} (got {kind!r}): this server "
                         "serves text models only.")
    return part["text"]


def _prompts(prompt) -> list[str | list[int]]:
    """OpenAI's four spellings: a string, a list of token ids, a list of strings, a list of token-id lists."""
    if prompt is None:
        raise bad("prompt", "'prompt' is required: a string (or a list of token ids).", "missing_required_parameter")
    if _token_ids(prompt) or isinstance(prompt, str):
        return [_one_prompt("prompt", prompt)]
    if isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
        if len(prompt) > MAX_PROMPTS:
            raise bad("prompt", f"'prompt' holds {len(prompt)} prompts; one request takes at most {MAX_PROMPTS}: "
                                "split them over several requests.")
        return [_one_prompt(f"prompt[{i}]", p) for i, p in enumerate(prompt)]
    if prompt == []:
        raise bad("prompt", "'prompt' is an empty list: send a string, a list of token ids, or a list of those "
                            "(one answer each).")
    raise bad("prompt", "'prompt' must be a string, a non-empty list of token ids, or a list of those "
                        f"(one answer each), not {_kind(prompt)}.")


def _one_prompt(where: str, prompt) -> str | list[int]:
    if isinstance(prompt, str):
        return _text(where, prompt)
    if _token_ids(prompt):
        return prompt
    raise bad(where, f"{where} must be a string or a non-empty list of token ids (integers from 0), "
                     f"not {_kind(prompt)}{' holding something else' if isinstance(prompt, list) and prompt else ''}.")


def _token_ids(prompt) -> bool:
    return (isinstance(prompt, list) and bool(prompt)
            and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in prompt))


def _sampling(body: dict) -> Sampling:
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    name = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    top_k = _integer(body, "top_k", -1, None, 0)
    return Sampling(
        temperature=_temperature(body),
        top_p=_number(body, "top_p", 0.0, 1.0, 1.0, open_low=True),
        top_k=max(0, top_k),
        repetition_penalty=_number(body, "repetition_penalty", 0.0, None, 1.0, open_low=True),
        # 0 = score the prompt only (completions with echo; the request functions refuse it elsewhere)
        max_tokens=None if max_tokens is None else _integer({name: max_tokens}, name, 0, None, None),
        stop=_stop(body.get("stop")),
        seed=_integer(body, "seed", *SEED_RANGE, None),
        ignore_eos=_boolean(body, "ignore_eos", False),
    )


def _stream(body: dict) -> tuple[bool, bool]:
    stream = _boolean(body, "stream", False)
    options = body.get("stream_options")
    if options is None:
        return stream, False
    if not isinstance(options, dict):
        raise bad("stream_options", f"'stream_options' must be an object, not {_kind(options)}.")
    if not stream:
        raise bad("stream_options", "'stream_options' is only allowed with \"stream\": true.")
    return stream, _boolean(options, "include_usage", False, "stream_options.include_usage")


def _refuse_unsupported(body: dict) -> None:
    if body.get("n") not in (None, 1):
        raise bad("n", f"'n' must be 1 (got {body.get('n')!r}): send one request per answer you want.",
                  "unsupported_parameter")
    for name in ("frequency_penalty", "presence_penalty"):
        if body.get(name) not in (None, 0, 0.0):
            raise bad(name, f"'{name}' is not supported by this server: leave it out or use repetition_penalty.",
                      "unsupported_parameter")
    for name in ("tools", "functions", "logit_bias"):
        if body.get(name):
            raise bad(name, f"'{name}' is not supported by this server: leave it out.", "unsupported_parameter")
    response_format = body.get("response_format")
    if response_format not in (None, {"type": "text"}):
        raise bad("response_format", "only {\"type\": \"text\"} is supported as 'response_format'.",
                  "unsupported_parameter")


def _number(body, name, low, high, default, open_low=False) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise bad(name, f"'{name}' must be a number, not {_kind(value)}.")
    too_low = value <= low if open_low else value < low
    if too_low or (high is not None and value > high):
        span = f"{'(' if open_low else '['}{low}, {high if high is not None else 'inf'}]"
        raise bad(name, f"'{name}' must be in {span} (got {value}).")
    return float(value)


def _integer(body, name, low, high, default) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(name, f"'{name}' must be an integer, not {_kind(value)}.")
    if (low is not None and value < low) or (high is not None and value > high):
        span = f"at least {low}" if high is None else f"in [{low}, {high}]"
        raise bad(name, f"'{name}' must be {span} (got {value}).")
    return value


def _boolean(body, name, default, param: str | None = None) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad(param or name, f"'{param or name}' must be true or false, not {_kind(value)}.")
    return value


def _stop(stop) -> tuple[str, ...]:
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise bad("stop", "'stop' must be a non-empty string or a list of non-empty strings.")
    if len(stops) > MAX_STOP_STRINGS:
        raise bad("stop", f"'stop' takes at most {MAX_STOP_STRINGS} strings (got {len(stops)}).")
    return tuple(_text("stop", s) for s in stops)


def _text(param: str, value: str) -> str:
    """JSON may spell half of a UTF-16 pair ("\\ud800") that is no character: no tokenizer can encode it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise bad(param, f"'{param}' holds an unpaired UTF-16 surrogate (\\u{ord(value[error.start]):04x} at "
                         f"character {error.start}), which is not text: send valid Unicode.") from None
    return value


def _temperature(body: dict) -> float:
    value = _number(body, "temperature", 0.0, 2.0, 1.0)
    if 0 < value < MIN_TEMPERATURE:
        raise bad("temperature", f"'temperature' {value} is too small to sample with: send 0 for greedy answers, "
                                 f"or at least {MIN_TEMPERATURE}.")
    return value


def _kind(value) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
             int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)
