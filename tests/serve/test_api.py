"""The served demo run through the official `openai` client: the model list,
greedy answers equal to `python -m backend.chat`, streaming equal to
non-streaming, usage counts, /v1/completions, stop strings, seeds, and 20
concurrent requests across three model names (with room for two adapters:
the least recently used is unloaded and attaches again when asked for)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from backend.models.demo_facts import DEMO_PROMPTS
from tests.serve.support import KEY, MAX_ADAPTERS, MAX_TOKENS, NAMES, PROMPT


@pytest.fixture(scope="module")
def client(server):
    from openai import OpenAI

    return OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, timeout=300)


def chat(client, model: str, prompt: str = PROMPT, **options):
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                          temperature=0, max_tokens=MAX_TOKENS, **options)


def test_models_lists_base_checkpoints_and_final(client):
    models = client.models.list()
    assert [m.id for m in models.data] == NAMES
    assert client.models.retrieve("final").id == "final"


def test_greedy_answers_equal_the_chat_cli(client, chat_cli, demo_model_dir):
    """base and final answer exactly what `python -m backend.chat --greedy` answers, with its token counts."""
    from transformers import AutoTokenizer

    out, err = chat_cli.communicate(timeout=600)
    assert chat_cli.returncode == 0, err
    expected = [json.loads(line) for line in out.splitlines()]
    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir)
    prompt_tokens = len(tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}],
                                                      add_generation_prompt=True, tokenize=True, return_dict=False))
    answers = {name: chat(client, name) for name in ("base", "final")}
    assert answers["base"].choices[0].message.content != answers["final"].choices[0].message.content
    for name, reference in zip(("base", "final"), expected):
        answer = answers[name]
        assert answer.model == name
        assert answer.choices[0].message.content == reference["answer"]
        assert answer.choices[0].finish_reason == ("length" if reference["finish"] == "length" else "stop")
        assert answer.usage.prompt_tokens == prompt_tokens
        assert answer.usage.completion_tokens == reference["new_tokens"]
        assert answer.usage.total_tokens == prompt_tokens + reference["new_tokens"]


def test_streaming_yields_the_same_text_and_usage(client):
    whole = chat(client, "checkpoint-8")
    pieces, finishes, usage = [], [], None
    for chunk in chat(client, "checkpoint-8", stream=True, stream_options={"include_usage": True}):
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finishes.append(choice.finish_reason)
    assert len([p for p in pieces if p]) > 1, "the answer should arrive in several chunks"
    assert "".join(pieces) == whole.choices[0].message.content
    assert [f for f in finishes if f] == [whole.choices[0].finish_reason]
    assert usage.model_dump() == whole.usage.model_dump()


def test_raw_stream_ends_with_done(server):
    body = {"model": "base", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 4, "stream": True}
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=120,
                      headers={"Authorization": f"Bearer {KEY}"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in events)
    assert events[-1] == "data: [DONE]"


def test_completions_with_the_templated_prompt_equal_chat(client, demo_model_dir):
    """/v1/completions given the chat template's token ids (or its text) answers what chat answers."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True,
                                        tokenize=True, return_dict=False)
    expected = chat(client, "final").choices[0].message.content
    by_ids = client.completions.create(model="final", prompt=ids, temperature=0, max_tokens=MAX_TOKENS)
    assert by_ids.choices[0].text == expected
    assert by_ids.usage.prompt_tokens == len(ids)
    streamed = client.completions.create(model="final", prompt=ids, temperature=0, max_tokens=MAX_TOKENS, stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == expected


def test_stop_string_cuts_the_answer_and_seed_repeats_sampling(client):
    whole = chat(client, "base").choices[0].message.content
    stop = whole[len(whole) // 2:len(whole) // 2 + 2]
    assert stop.strip(), whole
    cut = chat(client, "base", stop=[stop])
    assert cut.choices[0].message.content == whole[:whole.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
    first, second = (client.chat.completions.create(
        model="final", messages=[{"role": "user", "content": PROMPT}], temperature=1.0, top_p=0.95, seed=7,
        max_tokens=MAX_TOKENS).choices[0].message.content for _ in range(2))
    assert first == second


def test_stop_string_ends_generation_at_the_token_that_completes_it(client):
    """Generation ends at the token that completes the stop string: usage counts the tokens up to it
    (k, the fewest max_tokens whose answer holds the stop), not the ones generated after it."""
    def complete(**options):
        return client.completions.create(model="base", prompt="The capital of England is", temperature=0, **options)

    whole = complete(max_tokens=MAX_TOKENS)
    text = whole.choices[0].text
    at = next(i for i in range(len(text) // 3, len(text)) if text[i].strip())
    stop = text[at]
    k = next(k for k in range(1, MAX_TOKENS + 1) if stop in complete(max_tokens=k).choices[0].text)
    assert k < whole.usage.completion_tokens, (text, stop)   # the answer goes on after the stop
    cut = complete(max_tokens=MAX_TOKENS, stop=[stop])
    assert cut.choices[0].text == text[:text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
    assert cut.usage.completion_tokens == k
    streamed = list(complete(max_tokens=MAX_TOKENS, stop=[stop], stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in streamed if c.choices) == text[:text.index(stop)]
    assert streamed[-1].usage.completion_tokens == k


def test_twenty_concurrent_requests_across_three_models(client, server):
    models = ["base", "checkpoint-8", "final"]
    prompts = [p for p, _ in DEMO_PROMPTS[:4]]
    expected = {(m, p): chat(client, m, p).choices[0].message.content for m in models for p in prompts}
    jobs = [(models[i % 3], prompts[i % len(prompts)], i % 4 == 3) for i in range(20)]   # every 4th streams

    def ask(job) -> tuple[str, str]:
        model, prompt, stream = job
        if not stream:
            answer = chat(client, model, prompt)
            return answer.model, answer.choices[0].message.content
        chunks = list(chat(client, model, prompt, stream=True))
        return chunks[0].model, "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(ask, jobs))
    for (model, prompt, _), (answered_by, text) in zip(jobs, answers):
        assert answered_by == model
        assert text == expected[(model, prompt)], (model, prompt)
    health = httpx.get(f"{server.url}/health").json()
    assert health["status"] == "ok" and health["batches"] >= 1   # waiting requests were answered together


def attached(server) -> list[str]:
    """The checkpoint names of the adapters attached now, least recently used first."""
    names = httpx.get(f"{server.url}/health").json()["adapters"]
    return [next(n for n in ("checkpoint-8", "checkpoint-16", "final") if a.startswith(f"demo_run_{n.replace('-', '_')}_"))
            for a in names]


def test_old_adapters_are_unloaded_and_attach_again(client, server):
    """A server following a run keeps at most --max-adapters attached: the least recently used goes,
    and a request for it attaches it again, answering as before."""
    order = ["checkpoint-8", "checkpoint-16", "final"]
    answers = {name: chat(client, name).choices[0].message.content for name in order}
    assert len(set(answers.values())) > 1   # the adapters differ, so a wrong one would show
    assert attached(server) == order[-MAX_ADAPTERS:]
    again = chat(client, "checkpoint-8")   # unloaded a moment ago
    assert again.choices[0].message.content == answers["checkpoint-8"]
    assert attached(server) == ["final", "checkpoint-8"]
    assert chat(client, "checkpoint-16").choices[0].message.content == answers["checkpoint-16"]
    assert attached(server) == ["checkpoint-8", "checkpoint-16"]
