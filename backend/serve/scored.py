"""Requests answered token by token: log-probabilities (`logprobs`, chat's
`top_logprobs`), a completion's `echo` (the prompt's own tokens scored, and
with `max_tokens: 0` nothing else: lm-eval's loglikelihood), and a list of
prompts (one choice each). Not streamed (protocol.py refuses it).

One request holds the model for all its prompts, so its tokens are bounded
(MAX_REQUEST_TOKENS, refused before any work). A greedy one-token answer
(what lm-eval sends: echo, max_tokens 1, temperature 0) costs one forward
pass for the whole list: its logits score the prompts and give the token.
Longer answers are generated prompt by prompt, then scored together in one
more forward pass over prompt + answer (backend/serve/logprobs.py), so a
generated token's log-probability is the raw model's, as for echo.

Events, as the bridge's: ("start", prompt tokens of every prompt), then
("end", {"answers": [Answer...], "completion_tokens"}) or ("error", ApiError).
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass, field

from backend.chat.engine import ChatEngine
from backend.chat.generation import ChatError, _eos_ids, generation_config_for
from backend.chat.targets import GGUF, ChatTarget
from backend.models.loading import ModelLoadError
from backend.serve.job import DEFAULT_MAX_TOKENS, RequestJob, generation_settings
from backend.serve.logprobs import generate_ids, score_sequences
from backend.serve.prompts import chat_ids, completion_ids
from backend.serve.protocol import ApiError, Request

# Tokens decoded before each one to find the text it adds: enough for a multi-byte character or a
# SentencePiece space, and linear in the prompt (a whole-prefix decode per token would be quadratic).
LOOKBACK = 4
# Tokens one request may hold the model for, summed over its prompts (each prompt's tokens plus its
# max_tokens), or the model's context when that is more (one prompt that fits is always served): the
# generation thread answers one request at a time, and every other request waits behind it.
MAX_REQUEST_TOKENS = 8192


@dataclass
class Token:
    text: str                       # the token decoded alone
    logprob: float | None           # None: a prompt's first token (nothing before it)
    top: list[tuple[str, float]] | None
    offset: int                     # where it starts in the answer's text (characters)


@dataclass
class Answer:
    text: str
    finish: str                     # "stop" | "length"
    completion_tokens: int
    tokens: list[Token] | None = field(default=None)   # None: log-probabilities not asked for


def refuse_for(request: Request, target: ChatTarget) -> None:
    """llama.cpp computes only the last position's logits unless the whole context's are kept
    (logits_all, a vocabulary-wide row per token): not served for a GGUF file."""
    if request.per_token and target.kind == GGUF:
        what = ("log-probabilities" if request.logprobs is not None else
                "'echo'" if request.echo else "several prompts in one request")
        raise ApiError(400, f"The GGUF model '{request.model}' (llama.cpp) does not serve {what}: leave "
                            "'logprobs' and 'echo' out and send one prompt per request, or serve the run "
                            "itself (--run RUN) for log-probabilities.", param="logprobs" if request.logprobs
                       is not None else "echo" if request.echo else "prompt", code="unsupported_parameter")


def run_scored(engine: ChatEngine, device: str, job: RequestJob) -> int:
    """Answer `job`; returns the tokens generated. Every failure is posted as its sentence."""
    try:
        with engine.using(job.target, device) as (model, tokenizer, context):
            answers = _answer(model, tokenizer, context, job)
    except ApiError as error:
        job.post(("error", error))
        return 0
    except (ModelLoadError, ChatError, OSError, ValueError) as error:
        job.post(("error", ApiError(500, f"Scoring with '{job.request.model}' failed: {error}", type="server_error",
                                    code="model_error")))
        return 0
    except Exception as error:  # noqa: BLE001 - the server keeps running; the log has the traceback
        traceback.print_exc(file=sys.stderr)
        job.post(("error", ApiError(500, f"Generation failed: {type(error).__name__}: {error}",
                                    type="server_error", code="generation_failed")))
        return 0
    generated = sum(answer.completion_tokens for answer in answers)
    job.post(("end", {"answers": answers, "completion_tokens": generated, "finish": answers[0].finish}))
    return generated


def _answer(model, tokenizer, context: int, job: RequestJob) -> list[Answer]:
    request = job.request
    prompts = _prompt_ids(tokenizer, request)
    limits = [_limit(len(ids), request, context, index) for index, ids in enumerate(prompts)]
    _check_work(prompts, limits, context)
    job.post(("start", sum(len(ids) for ids in prompts)))
    settings = generation_settings(request)
    settings.min_new_tokens = max(limits) if request.sampling.ignore_eos else 0
    eos = _eos_ids(generation_config_for(model, tokenizer, settings, 1))
    top_k = request.logprobs or 0
    starts = [0 if request.echo else len(ids) for ids in prompts]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    one_greedy_token = (request.sampling.max_tokens == 1 and settings.greedy and not request.sampling.ignore_eos
                        and settings.repetition_penalty == 1.0)
    if one_greedy_token:
        scores = score_sequences(model, prompts, starts, top_k, pad, append_greedy=True)
        answers = [scored.ids[-1:] for scored in scores]
    else:
        answers = [generate_ids(model, tokenizer, ids, settings, limit, job.cancel) if limit else []
                   for ids, limit in zip(prompts, limits)]
        scores = (score_sequences(model, [p + a for p, a in zip(prompts, answers)], starts, top_k, pad)
                  if request.logprobs is not None else None)
    return [_build(tokenizer, request, index, prompts[index], answers[index], limits[index], eos,
                   scores[index] if scores is not None and request.logprobs is not None else None)
            for index in range(len(prompts))]


def _prompt_ids(tokenizer, request: Request) -> list[list[int]]:
    if request.kind == "chat":
        return [chat_ids(tokenizer, request.messages, request.model)]
    many = len(request.prompts) > 1
    return [completion_ids(tokenizer, prompt, f"prompt[{i}]" if many else "prompt")
            for i, prompt in enumerate(request.prompts)]


def _limit(prompt_tokens: int, request: Request, context: int, index: int) -> int:
    """New tokens for one prompt (0 = score only), or a 400 with the numbers when it does not fit."""
    where = "messages" if request.kind == "chat" else f"prompt[{index}]" if len(request.prompts) > 1 else "prompt"
    asked = request.sampling.max_tokens
    if asked == 0:
        if prompt_tokens > context:
            raise ApiError(400, f"This model's maximum context length is {context} tokens, but {where} takes "
                                f"{prompt_tokens} tokens. Shorten it.", param=where, code="context_length_exceeded")
        return 0
    if prompt_tokens >= context:
        score_only = "" if request.kind == "chat" else ", or send \"max_tokens\": 0 with \"echo\": true to score it only"
        raise ApiError(400, f"This model's maximum context length is {context} tokens, but {where} takes "
                            f"{prompt_tokens} tokens (no room for an answer). Shorten it{score_only}.", param=where,
                       code="context_length_exceeded")
    if asked is None:
        return min(DEFAULT_MAX_TOKENS, context - prompt_tokens)
    if prompt_tokens + asked > context:
        raise ApiError(400, f"This model's maximum context length is {context} tokens. However, you requested "
                            f"{prompt_tokens + asked} tokens ({prompt_tokens} in {where}, {asked} for "
                            f"max_tokens). Lower max_tokens or shorten {where}.", param="max_tokens",
                       code="context_length_exceeded")
    return asked


def _check_work(prompts: list[list[int]], limits: list[int], context: int) -> None:
    """A 400 before any forward pass when the request would hold the model for more than its bound."""
    work, bound = sum(len(ids) + limit for ids, limit in zip(prompts, limits)), max(MAX_REQUEST_TOKENS, context)
    if work > bound:
        raise ApiError(400, f"This request takes {work:,} tokens ({len(prompts)} prompts: their tokens plus "
                            f"max_tokens for each); one request may take at most {bound:,}, so that no request "
                            "holds the model for minutes while the others wait. Split the prompts over several "
                            "requests (lm-eval: a smaller --batch_size), or lower max_tokens.", param="prompt",
                       code="request_too_long")


def _build(tokenizer, request: Request, index: int, prompt: list[int], answer: list[int], limit: int, eos: set,
           scores) -> Answer:
    """The answer's text (cut at a stop string; after the prompt's own text under echo) and its tokens."""
    ended = bool(answer) and answer[-1] in eos
    kept = answer[:-1] if ended else answer   # the eos token is not part of the text
    text = tokenizer.decode(kept, skip_special_tokens=True)
    cut = min((i for i in (text.find(stop) for stop in request.sampling.stop) if i >= 0), default=-1)
    if cut >= 0:
        text = text[:cut]
    finish = "stop" if ended or cut >= 0 or len(answer) < limit else "length"
    echoed = ""
    if request.echo:
        raw = request.prompts[index]
        echoed = raw if isinstance(raw, str) else tokenizer.decode(prompt)
    tokens = None
    if scores is not None:
        # A completion lists every token the model produced, its eos too (OpenAI's and vLLM's lists: lm-eval
        # sums the echoed list up to its last entry, the generated token); a chat answer lists its content's.
        listed = kept if request.kind == "chat" else answer
        tokens = _tokens(tokenizer, scores, prompt if request.echo else [], listed, len(echoed),
                         cut if cut >= 0 else None)
    return Answer(echoed + text, finish, len(answer), tokens)


def _tokens(tokenizer, scores, echoed: list[int], answer: list[int], answer_start: int, cut: int | None) -> list[Token]:
    """Token entries for the echoed prompt and the answer's tokens (under a stop string, those starting before
    its `cut`). A token shows its own text, a special token's name included (so two of them never share one
    key of top_logprobs); its offset counts the characters the tokens before it add to the choice's text, in
    which the echoed prompt keeps its special tokens and the answer does not (decoded without them)."""
    entries, position = [], 0
    for part, in_answer, offset in ((echoed, False, 0), (answer, True, answer_start)):
        for index, token_id in enumerate(part):
            if in_answer and cut is not None and offset >= answer_start + cut:
                break
            before = part[max(0, index - LOOKBACK):index]
            head = tokenizer.decode(before, skip_special_tokens=False)
            text = _piece(tokenizer, before, head, token_id, False)
            top = scores.top[position]
            entries.append(Token(text, scores.logprobs[position], None if top is None else
                                 [(_piece(tokenizer, before, head, i, False), value) for i, value in top], offset))
            added = text
            if in_answer:   # the answer's text is decoded without special tokens
                added = _piece(tokenizer, before, tokenizer.decode(before, skip_special_tokens=True), token_id, True)
            offset += len(added)
            position += 1
    return entries


def _piece(tokenizer, before: list[int], head: str, token_id: int, skip: bool) -> str:
    """The text `token_id` adds after `before` (decoded as `head`): decoded with the tokens before it, a
    SentencePiece token keeps its leading space, which it loses decoded alone."""
    whole = tokenizer.decode(before + [token_id], skip_special_tokens=skip)
    if whole.startswith(head):
        return whole[len(head):]
    return tokenizer.decode([token_id], skip_special_tokens=skip)   # `head` ended inside a character
