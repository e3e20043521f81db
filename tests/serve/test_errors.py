"""Every refusal of the API server, through httpx against the real server process
(started with an API key, a 24-place queue and a small body limit): OpenAI's
error shape, the right status, the field named, never a traceback, and the
server still answering afterwards."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.polling import wait_for
from tests.serve.support import KEY, MAX_BODY, MAX_QUEUE, NAMES

HELLO = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def api(server):
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120) as client:
        yield client


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert "Traceback" not in response.text
    return body["error"]


def test_api_key_is_checked_on_every_route_but_health(server):
    assert httpx.get(f"{server.url}/health").status_code == 200
    for method, path in (("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/v1/completions"),
                         ("GET", "/no/such/route")):
        missing = error_of(httpx.request(method, f"{server.url}{path}", json={}), 401)
        assert "Authorization: Bearer" in missing["message"]
        wrong = httpx.request(method, f"{server.url}{path}", json={}, headers={"Authorization": "Bearer nope"})
        assert error_of(wrong, 401)["code"] == "invalid_api_key"


def test_unknown_model_is_404_with_the_names(api):
    error = error_of(api.post("/v1/chat/completions", json={"model": "checkpoint-99", "messages": HELLO}), 404)
    assert error["param"] == "model" and error["code"] == "model_not_found"
    assert all(name in error["message"] for name in NAMES)
    assert error_of(api.get("/v1/models/checkpoint-99"), 404)["code"] == "model_not_found"


@pytest.mark.parametrize("body, param", [
    (b'{"model": "base", "messages": [', "body"),
    (b'["model", "base"]', "body"),
    (b'\xff\xfe not text', "body"),
    ({"messages": HELLO}, "model"),
    ({"model": "base"}, "messages"),
    ({"model": "base", "messages": "hello"}, "messages"),
    ({"model": "base", "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"model": "base", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"model": "base", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content[0]"),
    ({"model": "base", "messages": HELLO, "temperature": "hot"}, "temperature"),
    ({"model": "base", "messages": HELLO, "temperature": 3}, "temperature"),
    ({"model": "base", "messages": HELLO, "top_p": 0}, "top_p"),
    ({"model": "base", "messages": HELLO, "max_tokens": 0}, "max_tokens"),
    ({"model": "base", "messages": HELLO, "n": 2}, "n"),
    ({"model": "base", "messages": HELLO, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"model": "base", "messages": HELLO, "seed": 1.5}, "seed"),
    ({"model": "base", "messages": HELLO, "stream": "yes"}, "stream"),
    ({"model": "base", "messages": HELLO, "tools": [{"type": "function"}]}, "tools"),
    # What once got a 500: nesting past the JSON parser's limit, numbers torch cannot take,
    # and text that is no Unicode (a lone UTF-16 surrogate spelled as a JSON escape).
    (b'{"model": "base", "messages": ' + b"[" * 3_500 + b"]" * 3_500 + b"}", "body"),
    ({"model": "base", "messages": HELLO, "temperature": 1e-300}, "temperature"),
    ({"model": "base", "messages": HELLO, "seed": 2 ** 70}, "seed"),
    ({"model": "base", "messages": HELLO, "seed": -(2 ** 70)}, "seed"),
    (b'{"model": "base", "messages": [{"role": "user", "content": "hi \\ud800 there"}]}', "messages[0].content"),
    (b'{"model": "base\\udc00", "messages": [{"role": "user", "content": "hi"}]}', "model"),
])
def test_malformed_requests_are_400_naming_the_field(api, body, param):
    if isinstance(body, bytes):
        response = api.post("/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
    else:
        response = api.post("/v1/chat/completions", json=body)
    error = error_of(response, 400)
    assert error["param"] == param, error
    assert error["type"] == "invalid_request_error"


def test_completions_refusals_name_the_field(api):
    lone = api.post("/v1/completions", content=b'{"model": "base", "prompt": "\\ud83d"}',
                    headers={"Content-Type": "application/json"})
    assert error_of(lone, 400)["param"] == "prompt"
    assert error_of(api.post("/v1/completions", json={"model": "base"}), 400)["param"] == "prompt"
    mixed = error_of(api.post("/v1/completions", json={"model": "base", "prompt": ["a", [1, "b"]]}), 400)
    assert mixed["param"] == "prompt[1]" and "list of token ids" in mixed["message"]
    lone_in_list = api.post("/v1/completions", content=b'{"model": "base", "prompt": ["a", "\\ud83d"]}',
                            headers={"Content-Type": "application/json"})
    assert error_of(lone_in_list, 400)["param"] == "prompt[1]"


@pytest.mark.parametrize("route, fields, param, says", [
    ("completions", {"logprobs": 21}, "logprobs", "at most 20"),
    ("completions", {"logprobs": -1}, "logprobs", "must be 0 or more"),
    ("completions", {"logprobs": 1.5}, "logprobs", "whole number from 0 to 20"),
    ("completions", {"logprobs": "2"}, "logprobs", "whole number from 0 to 20"),
    ("completions", {"logprobs": True}, "logprobs", "not true"),
    ("completions", {"top_logprobs": 1}, "top_logprobs", "is a /v1/chat/completions field"),
    ("completions", {"max_tokens": 0}, "max_tokens", "'max_tokens' 0 without \"echo\": true"),
    ("completions", {"max_tokens": -1, "echo": True}, "max_tokens", "at least 0"),
    ("completions", {"echo": "yes"}, "echo", "'echo' must be true or false"),
    ("completions", {"logprobs": 0, "stream": True}, "stream", "Streaming is not served with log-probabilities"),
    ("completions", {"echo": True, "stream": True}, "stream", "Streaming is not served with 'echo'"),
    ("completions", {"prompt": ["a", "b"], "stream": True}, "stream", "Streaming is not served with 2 prompts"),
    ("completions", {"prompt": []}, "prompt", "empty list"),
    ("completions", {"prompt": ["a"] * 257}, "prompt", "at most 256"),
    ("chat/completions", {"top_logprobs": 2}, "top_logprobs", "'top_logprobs' is only allowed with \"logprobs\": true"),
    ("chat/completions", {"logprobs": False, "top_logprobs": 0}, "top_logprobs", "'top_logprobs' is only allowed"),
    ("chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs", "at most 20"),
    ("chat/completions", {"logprobs": True, "top_logprobs": 2.0}, "top_logprobs", "whole number"),
    ("chat/completions", {"logprobs": 1}, "logprobs", "true or false"),
    ("chat/completions", {"echo": True}, "echo", "'echo' is a /v1/completions field"),
    ("chat/completions", {"max_tokens": 0}, "max_tokens", "a chat completion cannot give"),
    ("chat/completions", {"logprobs": True, "stream": True}, "stream", "Streaming is not served"),
])
def test_log_probability_requests_that_cannot_be_answered(api, route, fields, param, says):
    body = {"model": "base", "max_tokens": 1, **({"messages": HELLO} if route.startswith("chat") else {"prompt": "Hi"})}
    error = error_of(api.post(f"/v1/{route}", json=body | fields), 400)
    assert error["param"] == param and error["code"] in ("invalid_value", "unsupported_parameter"), error
    assert says in error["message"], error
    assert api.post("/v1/chat/completions", json=body | {"messages": HELLO, "logprobs": False}).status_code == 200


def test_a_prompt_of_a_list_that_does_not_fit_is_named(api):
    """In a list the prompt that does not fit is named; scoring alone (echo, max_tokens 0) may fill the context."""
    full, over = [100] * 512, [100] * 513   # the demo model's context is 512 tokens
    error = error_of(api.post("/v1/completions", json={"model": "final", "prompt": ["Hi", full], "echo": True,
                                                       "max_tokens": 1}), 400)
    assert error["param"] == "prompt[1]" and error["code"] == "context_length_exceeded" and "512" in error["message"]
    scored = api.post("/v1/completions", json={"model": "final", "prompt": full, "echo": True, "max_tokens": 0,
                                               "logprobs": 0})
    assert scored.status_code == 200 and len(scored.json()["choices"][0]["logprobs"]["token_logprobs"]) == 512
    error = error_of(api.post("/v1/completions", json={"model": "final", "prompt": over, "echo": True,
                                                       "max_tokens": 0}), 400)
    assert error["code"] == "context_length_exceeded" and "513" in error["message"]


def test_prompt_longer_than_the_context_is_400_with_the_numbers(api):
    ids = [100] * 600   # the demo model's context is 512 tokens
    error = error_of(api.post("/v1/completions", json={"model": "final", "prompt": ids}), 400)
    assert error["code"] == "context_length_exceeded"
    assert "512" in error["message"] and "600" in error["message"]
    asked = api.post("/v1/chat/completions", json={"model": "base", "messages": HELLO, "max_tokens": 100_000})
    error = error_of(asked, 400)
    assert error["param"] == "max_tokens" and "512" in error["message"] and "100000" in error["message"]


def test_body_over_the_limit_is_413(api):
    long_text = "x" * (MAX_BODY + 1)
    response = api.post("/v1/chat/completions", json={"model": "base", "messages": [{"role": "user", "content": long_text}]})
    assert error_of(response, 413)["code"] == "request_too_large"

    def chunks():   # no Content-Length: counted as it arrives
        yield json.dumps({"model": "base", "messages": [{"role": "user", "content": long_text}]}).encode()

    assert api.post("/v1/chat/completions", content=chunks()).status_code == 413


def test_unknown_route_and_method_answer_in_the_error_shape(api):
    assert error_of(api.get("/v1/nothing"), 404)["code"] == "unknown_url"
    assert error_of(api.delete("/v1/models"), 405)["code"] == "method_not_allowed"


def test_busy_server_answers_429_with_retry_after_and_keeps_running(api):
    """One request generates (ignore_eos keeps it going), MAX_QUEUE wait: the rest are turned away at once."""
    long_request = {"model": "final", "messages": HELLO, "max_tokens": 400, "ignore_eos": True, "stream": True}
    with api.stream("POST", "/v1/chat/completions", json=long_request) as stream:
        lines = stream.iter_lines()
        assert next(lines).startswith("data: ")   # generating now
        short = {"model": "base", "messages": HELLO, "max_tokens": 2}
        with ThreadPoolExecutor(max_workers=MAX_QUEUE + 6) as pool:
            responses = list(pool.map(lambda _: api.post("/v1/chat/completions", json=short), range(MAX_QUEUE + 6)))
    busy = [r for r in responses if r.status_code == 429]
    assert busy, [r.status_code for r in responses]
    assert all(r.status_code in (200, 429) for r in responses)
    for response in busy:
        assert int(response.headers["Retry-After"]) >= 1
        assert error_of(response, 429)["code"] == "queue_full"
    # After the queue drains, the server answers normally again.
    answer = api.post("/v1/chat/completions", json={"model": "base", "messages": HELLO, "max_tokens": 2})
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["role"] == "assistant"
    assert api.get("/health").json()["status"] == "ok"


def test_a_client_that_leaves_mid_stream_frees_the_model(api):
    """Closing a stream stops its generation at the next token, long before its 450 tokens."""
    before = api.get("/health").json()["generated_tokens"]
    long_request = {"model": "checkpoint-8", "messages": HELLO, "max_tokens": 450, "ignore_eos": True, "stream": True}
    with api.stream("POST", "/v1/chat/completions", json=long_request) as stream:
        lines = stream.iter_lines()
        assert next(lines).startswith("data: ")
    health = wait_for(lambda: (h := api.get("/health").json())["busy"] is False and h, "the generation to stop")
    assert health["generated_tokens"] - before < 450
    answer = api.post("/v1/completions", json={"model": "base", "prompt": "Hello", "max_tokens": 2})
    assert answer.status_code == 200 and answer.json()["usage"]["completion_tokens"] == 2


def test_only_its_own_host_names_are_answered(server, api):
    """DNS rebinding: a page whose own name resolves to 127.0.0.1 still sends that name as Host."""
    for host in (f"evil.example:{server.port}", "evil.example", f"127.0.0.1.evil.example:{server.port}"):
        refused = api.get("/v1/models", headers={"Host": host})
        assert error_of(refused, 400)["code"] == "invalid_host" and "--allow-remote" in refused.json()["error"]["message"]
    assert error_of(httpx.get(f"{server.url}/health", headers={"Host": "evil.example"}), 400)["param"] == "host"
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", f"[::1]:{server.port}", "LOCALHOST"):
        assert api.get("/v1/models", headers={"Host": host}).status_code == 200, host


def test_a_browser_request_from_another_origin_is_refused(server, api):
    """A cross-site page may send a 'simple' POST (text/plain) without a preflight: its Origin gives it away."""
    body = json.dumps({"model": "base", "messages": HELLO, "max_tokens": 1})
    cross = api.post("/v1/chat/completions", content=body, headers={"Origin": "http://evil.example",
                                                                   "Content-Type": "text/plain"})
    assert error_of(cross, 403)["code"] == "cross_origin"
    assert error_of(api.get("/v1/models", headers={"Origin": "null"}), 403)["param"] == "origin"
    assert error_of(api.get("/v1/models", headers={"Origin": "http://[::1"}), 403)["param"] == "origin"  # not a URL
    same = api.post("/v1/chat/completions", content=body, headers={"Origin": server.url})
    assert same.status_code == 200
