"""Log-probabilities from the served demo run: lm-eval's own `local-completions`
client scores a multiple-choice task through /v1/completions (echo, logprobs,
a list of prompts per request) to the numbers of lm-eval's `hf` model on the
same checkpoint; the openai client reads OpenAI's two shapes (completions'
parallel lists, chat's content entries); echoed log-probabilities equal a
direct transformers + peft forward pass on the same weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from backend.models.demo_facts import CAPITALS
from tests.eval_export_runs import one_torch_thread  # noqa: F401 - a fixture
from tests.serve.support import KEY, MAX_TOKENS, PROMPT, RUN_ID, server_env

TEXTS = ["The capital of France is", "Snow is white and grass is", "The capital of Japan is Tokyo."]


@pytest.fixture(scope="module")
def client(server):
    from openai import OpenAI

    return OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def reference_models(serve_workspace, demo_model_dir, one_torch_thread):  # noqa: F811 - the fixture above
    """The demo base and the run's final adapter loaded by transformers + peft in this process."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir)
    base = AutoModelForCausalLM.from_pretrained(demo_model_dir, dtype="float32").eval()
    final = AutoModelForCausalLM.from_pretrained(demo_model_dir, dtype="float32").eval()
    final = PeftModel.from_pretrained(final, serve_workspace.runs_dir / RUN_ID / "final").eval()
    return tokenizer, {"base": base, "final": final}


def direct_logprobs(model, ids: list[int]):
    """log-softmax of the raw logits: row p scores token p + 1."""
    import torch

    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits, dim=-1)


def test_echo_scores_the_prompt_like_transformers(client, reference_models):
    """echo + max_tokens 0 (lm-eval's loglikelihood): one choice per prompt, the first token's log-probability
    null, every other one (and its top 3) equal to a direct forward pass of the model the request named."""
    tokenizer, models = reference_models
    answers = {name: client.completions.create(model=name, prompt=TEXTS, echo=True, max_tokens=0, logprobs=3)
               for name in models}
    for name, answer in answers.items():
        assert [c.index for c in answer.choices] == [0, 1, 2]
        for text, choice in zip(TEXTS, answer.choices):
            ids = tokenizer(text)["input_ids"]
            expected = direct_logprobs(models[name], ids)
            got = choice.logprobs
            assert choice.text == text and choice.finish_reason == "length"
            assert "".join(got.tokens) == text and len(got.tokens) == len(ids)
            assert got.token_logprobs[0] is None and got.top_logprobs[0] is None
            assert got.text_offset == [len(tokenizer.decode(ids[:i])) for i in range(len(ids))]
            for position in range(1, len(ids)):
                assert got.token_logprobs[position] == pytest.approx(float(expected[position - 1, ids[position]]),
                                                                     abs=1e-4)
                values, indices = expected[position - 1].topk(3)
                assert got.top_logprobs[position] == pytest.approx(
                    {tokenizer.decode([int(i)]): float(v) for i, v in zip(indices, values)}, abs=1e-4)
        assert answer.usage.prompt_tokens == sum(len(tokenizer(t)["input_ids"]) for t in TEXTS)
        assert answer.usage.completion_tokens == 0
    assert answers["base"].choices[0].logprobs.token_logprobs != answers["final"].choices[0].logprobs.token_logprobs


def test_token_id_prompts_score_like_their_text(client, reference_models):
    tokenizer, _ = reference_models
    by_text = client.completions.create(model="final", prompt=TEXTS[:2], echo=True, max_tokens=1, logprobs=1,
                                        temperature=0)
    by_ids = client.completions.create(model="final", prompt=[tokenizer(t)["input_ids"] for t in TEXTS[:2]],
                                       echo=True, max_tokens=1, logprobs=1, temperature=0)
    for text, choice, other in zip(TEXTS, by_text.choices, by_ids.choices):
        assert choice.logprobs.token_logprobs == pytest.approx(other.logprobs.token_logprobs, abs=1e-5)
        alone = client.completions.create(model="final", prompt=text, max_tokens=1, temperature=0).choices[0].text
        assert choice.text == text + alone   # echo, then the one greedy token
        assert len(choice.logprobs.tokens) == len(tokenizer(text)["input_ids"]) + 1


def test_greedy_tokens_are_their_own_top_alternative(client):
    """A greedy answer's tokens are each the most likely one: its log-probability is the top of top_logprobs,
    in both shapes, and asking for log-probabilities does not change the answer."""
    plain = client.completions.create(model="final", prompt=TEXTS[0], max_tokens=MAX_TOKENS, temperature=0)
    scored = client.completions.create(model="final", prompt=TEXTS[0], max_tokens=MAX_TOKENS, temperature=0,
                                       logprobs=4)
    choice = scored.choices[0]
    assert choice.text == plain.choices[0].text and scored.usage == plain.usage
    assert "".join(choice.logprobs.tokens) == choice.text
    for token, value, top in zip(choice.logprobs.tokens, choice.logprobs.token_logprobs, choice.logprobs.top_logprobs):
        assert len(top) == 4 and value == max(top.values()) and top[token] == value

    messages = [{"role": "user", "content": PROMPT}]
    chat = client.chat.completions.create(model="final", messages=messages, max_tokens=MAX_TOKENS, temperature=0,
                                          logprobs=True, top_logprobs=3)
    alone = client.chat.completions.create(model="final", messages=messages, max_tokens=MAX_TOKENS, temperature=0)
    content = chat.choices[0].logprobs.content
    assert chat.choices[0].message.content == alone.choices[0].message.content
    assert "".join(entry.token for entry in content) == chat.choices[0].message.content
    for entry in content:
        assert entry.bytes == list(entry.token.encode("utf-8")) and len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].token == entry.token and entry.top_logprobs[0].logprob == entry.logprob
        assert entry.logprob <= 0
    no_top = client.chat.completions.create(model="final", messages=messages, max_tokens=3, temperature=0,
                                            logprobs=True)
    assert no_top.choices[0].logprobs.content and all(e.top_logprobs == [] for e in no_top.choices[0].logprobs.content)
    assert alone.choices[0].logprobs is None


def test_a_list_of_prompts_answers_each_as_alone(client):
    together = client.completions.create(model="checkpoint-8", prompt=TEXTS, max_tokens=8, temperature=0)
    alone = [client.completions.create(model="checkpoint-8", prompt=t, max_tokens=8, temperature=0) for t in TEXTS]
    assert [c.index for c in together.choices] == [0, 1, 2]
    assert [c.text for c in together.choices] == [a.choices[0].text for a in alone]
    assert [c.finish_reason for c in together.choices] == [a.choices[0].finish_reason for a in alone]
    assert together.usage.completion_tokens == sum(a.usage.completion_tokens for a in alone)
    assert together.usage.prompt_tokens == sum(a.usage.prompt_tokens for a in alone)


def write_task(folder) -> None:
    """Ten multiple-choice questions on the demo's facts, as an lm-eval task over a local JSON file."""
    capitals = [capital for _, capital, _, _ in CAPITALS]
    rows = []
    for index, (country, capital, _, _) in enumerate(CAPITALS[:10]):
        choices = [capital] + [capitals[(index + k) % len(capitals)] for k in (3, 7, 11)]
        choices = choices[index % 4:] + choices[:index % 4]
        rows.append({"question": f"The capital of {country} is", "choices": choices, "answer": choices.index(capital)})
    (folder / "questions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    (folder / "demo_capitals.yaml").write_text(
        "task: demo_capitals\ndataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {folder / 'questions.jsonl'}\ntest_split: test\n"
        "output_type: multiple_choice\ndoc_to_text: \"{{question}}\"\ndoc_to_choice: \"{{choices}}\"\n"
        "doc_to_target: answer\nmetric_list:\n  - metric: acc\n  - metric: acc_norm\n", encoding="utf-8")


def lm_eval(tmp_path, name: str, *model: str) -> subprocess.Popen:
    env = server_env() | {"OPENAI_API_KEY": KEY, "HF_DATASETS_OFFLINE": "1",
                          "HF_DATASETS_CACHE": str(tmp_path / "datasets-cache"), "HF_HOME": str(tmp_path / "hf")}
    command = [os.path.join(os.path.dirname(sys.executable), "lm_eval"), *model, "--tasks", "demo_capitals",
               "--include_path", str(tmp_path), "--batch_size", "2", "--output_path", str(tmp_path / name),
               "--log_samples"]
    log = open(tmp_path / f"{name}.log", "wb")   # noqa: SIM115 - the child writes it; read after wait()
    return subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)


def results(tmp_path, name: str) -> tuple[dict, list[dict]]:
    folder = tmp_path / name
    summary = json.loads(next(folder.rglob("results_*.json")).read_text(encoding="utf-8"))["results"]["demo_capitals"]
    samples = [json.loads(line) for line in next(folder.rglob("samples_*.jsonl")).read_text().splitlines()]
    return summary, sorted(samples, key=lambda s: s["doc_id"])


@pytest.mark.timeout(1800)
def test_lm_eval_multiple_choice_through_the_server_equals_its_hf_model(server, serve_workspace, demo_model_dir,
                                                                        tmp_path):
    """`lm_eval --model local-completions` against the server (batches of 2 prompts, text prompts) gives the
    accuracy, and per choice the log-likelihood and is-greedy flag, of `lm_eval --model hf` with the adapter."""
    final = serve_workspace.runs_dir / RUN_ID / "final"
    write_task(tmp_path)
    runs = {
        "server": lm_eval(tmp_path, "server", "--model", "local-completions", "--model_args",
                          f"base_url={server.url}/v1/completions,model=final,tokenizer={final},"
                          "tokenized_requests=False"),
        "hf": lm_eval(tmp_path, "hf", "--model", "hf", "--model_args", f"pretrained={demo_model_dir},peft={final}",
                      "--device", "cpu"),
    }
    for name, process in runs.items():
        assert process.wait() == 0, (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:]
    (served, served_samples), (direct, direct_samples) = results(tmp_path, "server"), results(tmp_path, "hf")
    assert served["acc,none"] == direct["acc,none"] and served["acc_norm,none"] == direct["acc_norm,none"]
    assert len(served_samples) == len(direct_samples) == 10
    for ours, theirs in zip(served_samples, direct_samples):
        assert ours["acc"] == theirs["acc"] and ours["acc_norm"] == theirs["acc_norm"]
        for (score, greedy), (expected, expected_greedy) in zip(ours["filtered_resps"], theirs["filtered_resps"]):
            assert float(score) == pytest.approx(float(expected), abs=1e-4) and greedy == expected_greedy
    assert direct["acc,none"] > 0.25   # better than chance on 4 choices: the task measures what the model knows
