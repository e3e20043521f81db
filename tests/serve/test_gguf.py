"""`python -m backend.serve --gguf FILE`: the session's exported q4_k_m file (tests/conftest.py)
served by a real server process through llama.cpp, asked with the official `openai` client: the
file's stem as the model name, greedy answers that are llama.cpp's argmax over the run's training
template (the export folder's tokenizer), streaming equal to non-streaming, usage, completions,
stop strings, max_tokens and the same errors as the transformers engine; the refusals at start."""

from __future__ import annotations

import shutil

import pytest

from backend.chat.gguf_targets import file_target
from backend.serve.cli import main
from tests.serve.support import ServerProcess

MAX_TOKENS = 20
PROMPT = "Who are you?"
MESSAGES = [{"role": "user", "content": PROMPT}]


@pytest.fixture(scope="module")
def gguf_file(gguf_export):
    out, report = gguf_export
    return out / "gguf" / report["gguf"]["files"]["q4_k_m"]["file"]


@pytest.fixture(scope="module")
def gguf_server(gguf_export, gguf_file):
    out, _ = gguf_export
    process = ServerProcess(out, source=("--gguf", str(gguf_file))).start()
    yield process
    assert process.stop() == 0, process.tail()
    assert "Traceback" not in process.tail()


@pytest.fixture(scope="module")
def client(gguf_server):
    from openai import OpenAI

    return OpenAI(base_url=f"{gguf_server.url}/v1", api_key="none", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def reference(gguf_export, gguf_file):
    """What the answer must be: the training template (the export's tokenizer) tokenised by
    transformers, then llama.cpp's argmax tokens, decoded by transformers."""
    from backend.models.gguf_engine import GGUFModel
    from backend.models.loading import load_tokenizer

    out, _ = gguf_export
    tokenizer = load_tokenizer(out)
    prompt = list(tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True, return_dict=False))
    model = GGUFModel(gguf_file, n_ctx=512)
    try:
        answer = model.greedy(prompt, MAX_TOKENS)
    finally:
        model.close()
    texts = [tokenizer.decode(answer[:n], skip_special_tokens=True) for n in range(1, len(answer) + 1)]
    return {"prompt": prompt, "answer": answer, "texts": texts,
            "text": tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)}


def chat(client, model: str = "assistant-q4_k_m", **options):
    return client.chat.completions.create(model=model, messages=MESSAGES, **{"temperature": 0,
                                                                             "max_tokens": MAX_TOKENS, **options})


def test_the_file_is_served_under_its_stem(client):
    assert [m.id for m in client.models.list().data] == ["assistant-q4_k_m"]
    assert client.models.retrieve("assistant-q4_k_m").model_dump()["kind"] == "gguf"


def test_greedy_chat_is_llama_cpps_argmax_over_the_training_template(client, reference):
    answer = chat(client)
    assert answer.choices[0].message.content == reference["texts"][-1]
    assert answer.usage.prompt_tokens == len(reference["prompt"])
    assert answer.usage.completion_tokens == len(reference["answer"])
    assert answer.choices[0].finish_reason == ("length" if len(reference["answer"]) == MAX_TOKENS else "stop")


def test_streaming_yields_the_same_text_and_usage(client):
    whole = chat(client)
    chunks = list(chat(client, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    assert chunks[-1].usage.model_dump() == whole.usage.model_dump()


def test_completions_of_the_templated_text_or_its_token_ids_equal_chat(client, reference):
    whole = chat(client)
    for prompt in (reference["text"], reference["prompt"]):
        done = client.completions.create(model="assistant-q4_k_m", prompt=prompt, temperature=0, max_tokens=MAX_TOKENS)
        assert done.choices[0].text == whole.choices[0].message.content
        assert done.usage.model_dump() == whole.usage.model_dump()


def test_a_stop_string_cuts_the_answer_at_the_token_that_completes_it(client, reference):
    texts = reference["texts"]
    cut = next(n for n in range(3, len(texts) - 1) if texts[n].strip() and texts[n] != texts[n - 1])
    stop = texts[cut][len(texts[cut - 1]):]
    completes = next(n + 1 for n, text in enumerate(texts) if stop in text)
    answer = chat(client, stop=[stop])
    assert answer.choices[0].message.content == texts[completes - 1].split(stop)[0]
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage.completion_tokens == completes


def test_max_tokens_ends_with_length_and_a_seed_repeats_sampling(client, reference):
    short = chat(client, max_tokens=3)
    assert short.choices[0].finish_reason == "length" and short.usage.completion_tokens == 3
    assert short.choices[0].message.content == reference["texts"][2]
    sampled = [chat(client, temperature=0.9, seed=11).choices[0].message.content for _ in range(2)]
    assert sampled[0] == sampled[1]


@pytest.mark.parametrize(("options", "status", "param", "says"), [
    ({"model": "final"}, 404, "model", "Use one of: assistant-q4_k_m"),
    ({"max_tokens": 5000}, 400, "max_tokens", "maximum context length is 4096 tokens"),
    ({"n": 2}, 400, "n", "'n' must be 1"),
    ({"logprobs": True}, 400, "logprobs", "(llama.cpp) does not serve log-probabilities"),
    ({"temperature": 3}, 400, "temperature", "'temperature' must be in"),
])
def test_the_transformers_engines_errors(client, options, status, param, says):
    import openai

    with pytest.raises(openai.APIStatusError) as refused:
        chat(client, **options)
    assert refused.value.status_code == status
    assert refused.value.body["param"] == param and says in refused.value.body["message"]


def test_a_file_on_its_own_is_rendered_by_its_own_chat_template(gguf_file, reference, tmp_path):
    """Outside its export folder there is no tokenizer beside it: the GGUF's tokenizer.chat_template
    (written there by the export) renders the same training prompt."""
    from backend.chat.gguf_generation import load_gguf

    alone = tmp_path / "alone.gguf"
    shutil.copyfile(gguf_file, alone)
    target = file_target(alone)
    assert target.name == "alone" and target.tokenizer is None
    model, tokenizer, context = load_gguf(target)
    try:
        assert tokenizer.apply_chat_template(MESSAGES) == reference["prompt"] and context == 4096
    finally:
        model.close()


@pytest.mark.parametrize(("extra", "says"), [
    (("--checkpoint", "final"), "--checkpoint does not apply to --gguf"),
    (("--device", "cuda:0"), "--device does not apply to --gguf"),
    (("--engine", "vllm"), "--engine does not apply to --gguf"),
])
def test_run_options_with_gguf_are_refused(gguf_file, capsys, extra, says):
    assert main(["--gguf", str(gguf_file), *extra]) == 2
    assert says in capsys.readouterr().err


def test_a_missing_or_other_file_is_refused(tmp_path, capsys):
    assert main(["--gguf", str(tmp_path / "nope.gguf")]) == 2
    said = capsys.readouterr().err
    assert "GGUF file" in said and "does not exist" in said
    other = tmp_path / "model.safetensors"
    other.write_bytes(b"x")
    assert main(["--gguf", str(other)]) == 2
    assert "is not a .gguf file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as both:
        main(["--gguf", str(other), "--run", str(tmp_path)])
    assert both.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
