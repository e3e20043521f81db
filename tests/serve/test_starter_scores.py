"""Scores of the real starter (SmolLM2-135M-Instruct, served with --folder) where its chat template's
special tokens matter: lm-eval's own `local-completions` client scores a continuation whose greedy next
token is `<|im_end|>` to the sum of plain transformers' log-softmax (the echoed lists end with that
generated token, as OpenAI's and vLLM's do); special tokens keep their names in top_logprobs; and one
request that would hold the model for too many tokens is refused with the bound before any work."""

from __future__ import annotations

import httpx
import pytest

from backend.serve.scored import MAX_REQUEST_TOKENS
from tests.eval_export_runs import one_torch_thread  # noqa: F401 - a fixture
from tests.serve.support import ServerProcess

NAME = "smollm2"
QUESTION = "What is the capital of France? One word."
ANSWER = "Paris."   # the greedy answer: after it the model's most likely token is <|im_end|>


@pytest.fixture(scope="module")
def starter_server(tmp_path_factory, starter_model_dir, starts_processes):
    """`python -m backend.serve --folder STARTER --name smollm2`, one process for the module."""
    log_home = tmp_path_factory.mktemp("starter-serve")
    process = ServerProcess(log_home / "runs" / "none", source=("--folder", str(starter_model_dir), "--name", NAME))
    yield process.start()
    assert process.stop() == 0, process.tail()
    assert "Traceback" not in process.tail()


@pytest.fixture(scope="module")
def starter(starter_model_dir, one_torch_thread):  # noqa: F811 - the fixture imported above
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(starter_model_dir)
    model = AutoModelForCausalLM.from_pretrained(starter_model_dir, dtype="float32").eval()
    context = tokenizer.apply_chat_template([{"role": "user", "content": QUESTION}], tokenize=False,
                                            add_generation_prompt=True)
    return tokenizer, model, context


def log_softmax(model, ids: list[int]):
    """Plain transformers: row p holds the log-probabilities of the token after position p."""
    import torch

    with torch.inference_mode():
        return torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)


def complete(server, **body) -> dict:
    answer = httpx.post(f"{server.url}/v1/completions", json={"model": NAME, **body}, timeout=300)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_lm_eval_scores_a_continuation_the_model_ends_after(starter_server, starter, starter_model_dir):
    """lm-eval sums token_logprobs[ctxlen:-1]: the last entry must be the generated token, even when it is
    the end of the answer; without it a one-token continuation scored 0.0 and a longer one lost a token."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    tokenizer, model, context = starter
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pairs = [(context, ANSWER), (context + ANSWER[:-1], ANSWER[-1])]   # two tokens, then one
    client = LocalCompletionsAPI(base_url=f"{starter_server.url}/v1/completions", model=NAME,
                                 tokenizer=str(starter_model_dir), max_retries=1)
    scored = client.loglikelihood([Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)],
                                  disable_tqdm=True)
    for (ctx, continuation), (score, greedy) in zip(pairs, scored):
        whole = tokenizer(ctx + continuation)["input_ids"]
        start = len(tokenizer(ctx.rstrip())["input_ids"])   # lm-eval scores the context's trailing "\n" too
        expected = log_softmax(model, whole + [end])
        assert int(expected[-2].argmax()) == end   # the model's next token after the continuation ends it
        assert score == pytest.approx(sum(float(expected[p - 1, whole[p]]) for p in range(start, len(whole))),
                                      abs=1e-4)
        assert score < 0 and greedy == all(int(expected[p - 1].argmax()) == whole[p] for p in range(start, len(whole)))

    choice = complete(starter_server, prompt=context + ANSWER, echo=True, max_tokens=1, logprobs=1,
                      temperature=0)["choices"][0]
    listed, ids = choice["logprobs"], tokenizer(context + ANSWER)["input_ids"]
    expected = log_softmax(model, ids + [end])
    assert choice["finish_reason"] == "stop" and choice["text"] == context + ANSWER   # the eos is not text
    assert listed["tokens"][-1] == "<|im_end|>" and len(listed["tokens"]) == len(ids) + 1
    assert listed["text_offset"][-1] == len(choice["text"])
    assert listed["token_logprobs"][1:] == pytest.approx([float(expected[p - 1, t]) for p, t in
                                                          enumerate(ids + [end]) if p], abs=1e-4)


def test_special_tokens_keep_their_names_in_top_logprobs(starter_server, starter):
    """After an ended answer and a newline the two most likely tokens are both special: each under its own
    name (decoded alone without skipping special tokens they were both "", one key for two tokens)."""
    tokenizer, model, context = starter
    prompt = context + ANSWER + "<|im_end|>\n"
    expected = log_softmax(model, tokenizer(prompt)["input_ids"])[-1]
    values, indices = expected.topk(2)
    choice = complete(starter_server, prompt=prompt, max_tokens=1, logprobs=2, temperature=0)["choices"][0]
    top = choice["logprobs"]["top_logprobs"][0]
    assert set(top) == {"<|im_end|>", "<|im_start|>"}
    assert top == pytest.approx({tokenizer.convert_ids_to_tokens(int(i)): float(v) for i, v in zip(indices, values)},
                                abs=1e-4)
    assert choice["logprobs"]["tokens"] == ["<|im_end|>"] and choice["text"] == ""


def test_a_request_over_the_token_bound_is_refused_before_any_work(starter_server):
    """256 prompts of token ids, one token over the bound in all: a 400 naming the bound and what to do."""
    per_prompt, extra = divmod(MAX_REQUEST_TOKENS + 1 - 256, 256)
    prompts = [[28] * (per_prompt + (1 if i < extra else 0)) for i in range(256)]
    assert sum(len(p) + 1 for p in prompts) == MAX_REQUEST_TOKENS + 1
    answer = httpx.post(f"{starter_server.url}/v1/completions", timeout=300, json={
        "model": NAME, "prompt": prompts, "echo": True, "max_tokens": 1, "logprobs": 5, "temperature": 0})
    assert answer.status_code == 400, answer.text[:300]
    error = answer.json()["error"]
    assert error["code"] == "request_too_long" and error["param"] == "prompt"
    assert f"{MAX_REQUEST_TOKENS + 1:,} tokens" in error["message"] and f"at most {MAX_REQUEST_TOKENS:,}" in error["message"]
    assert "--batch_size" in error["message"]
    assert complete(starter_server, prompt=prompts[:2], echo=True, max_tokens=0, logprobs=0)["usage"]["prompt_tokens"] \
        == len(prompts[0]) + len(prompts[1])
