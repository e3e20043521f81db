"""One reply from one model: settings, the prompt through the chat template
(cut to the context with a notice), and streamed generation that a Stop
event cancels. No model loading here: the engine hands in a ready model."""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import asdict, dataclass, field

import torch
from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

from backend.messages import Message, message_of, msg
from backend.models.chat_templates import stop_token_ids

# Hard ceiling on new tokens whatever the user asks: a chat answer, not a book.
MAX_NEW_TOKENS_CAP = 4096
# Tokens kept for the prompt at the least when max new tokens is capped to the context.
MIN_PROMPT_TOKENS = 16


@dataclass
class GenerationSettings:
    greedy: bool = True
    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int = 50
    repetition_penalty: float = 1.0
    max_new_tokens: int = 128
    seed: int = 0               # sampling only: the same seed gives the same sampled answer
    system_prompt: str = ""
    min_new_tokens: int = 0     # > 0: ignore end-of-sequence until this many (the API's ignore_eos)
    stop_strings: tuple[str, ...] = ()   # the API's stop: generation ends at the token that completes one

    def problems(self) -> list[Message]:
        """What is wrong with these settings, as sentences a user can act on (catalogued messages)."""
        found = []
        if self.max_new_tokens < 1:
            found.append(msg("chat.problem.max_tokens", value=self.max_new_tokens))
        if not self.greedy:
            if self.temperature <= 0:
                found.append(msg("chat.problem.temperature", value=self.temperature))
            if not 0 < self.top_p <= 1:
                found.append(msg("chat.problem.top_p", value=self.top_p))
            if self.top_k < 0:
                found.append(msg("chat.problem.top_k", value=self.top_k))
        if self.repetition_penalty <= 0:
            found.append(msg("chat.problem.repetition", value=self.repetition_penalty))
        return found

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Prompt:
    input_ids: torch.Tensor        # shape (1, tokens), after the chat template
    max_new_tokens: int            # after capping
    notices: list[Message] = field(default_factory=list)  # catalogued (backend/messages.py)


class ChatError(ValueError):
    """A prompt cannot be built for this model; the message says what to do."""


def _render(tokenizer, messages: list[dict]) -> list[int]:
    if not getattr(tokenizer, "chat_template", None):
        raise ChatError(f"The tokenizer of {getattr(tokenizer, 'name_or_path', 'this model')} has no chat template, "
                        "so it cannot be chatted with: pick an Instruct / chat model or add a chat template.")
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # some tokenizers return a BatchEncoding anyway
        ids = ids["input_ids"]
    return list(ids)


def build_messages(system_prompt: str, history: list[dict], user_text: str) -> list[dict]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt.strip() else []
    return messages + list(history) + [{"role": "user", "content": user_text}]


def build_prompt(tokenizer, messages: list[dict], context_length: int, max_new_tokens: int) -> Prompt:
    """Template `messages`; if prompt + answer would not fit the context, drop the
    oldest turns, then cut the end of the last user message, and say so."""
    notices = []
    cap = min(MAX_NEW_TOKENS_CAP, max(1, context_length - MIN_PROMPT_TOKENS))
    if max_new_tokens > cap:
        notices.append(msg("chat.notice.max_tokens", asked=max_new_tokens, cap=cap, context=context_length))
        max_new_tokens = cap
    budget = context_length - max_new_tokens   # tokens, after the chat template
    ids = _render(tokenizer, messages)
    full_length = len(ids)
    if len(ids) <= budget:
        return Prompt(torch.tensor([ids]), max_new_tokens, notices)

    system = [m for m in messages[:1] if m["role"] == "system"]
    turns = messages[len(system):]
    dropped = 0
    while len(turns) > 1 and len(ids) > budget:   # drop the oldest user/assistant pair
        turns = turns[2:] if len(turns) > 2 else turns[1:]
        dropped += 1
        ids = _render(tokenizer, system + turns)
    if len(ids) > budget:
        ids = _cut_last_message(tokenizer, system + turns, budget)
    sizes = {"kept": len(ids), "full": full_length, "context": context_length, "new": max_new_tokens}
    notices.append(msg("chat.notice.prompt_cut_dropped", dropped=dropped, **sizes) if dropped
                   else msg("chat.notice.prompt_cut", **sizes))
    return Prompt(torch.tensor([ids]), max_new_tokens, notices)


def _cut_last_message(tokenizer, messages: list[dict], budget: int) -> list[int]:
    """Keep the start of the last message so the templated prompt fits `budget`."""
    last = messages[-1]
    overhead = len(_render(tokenizer, messages[:-1] + [{**last, "content": ""}]))
    pieces = tokenizer(last["content"], add_special_tokens=False)["input_ids"]
    keep = max(0, budget - overhead)
    while True:
        text = tokenizer.decode(pieces[:keep], skip_special_tokens=True)
        ids = _render(tokenizer, messages[:-1] + [{**last, "content": text}])
        if len(ids) <= budget or keep == 0:
            break
        keep -= max(1, len(ids) - budget)   # re-tokenising can merge differently: shrink and retry
    # Even an empty message may not fit a tiny budget (a long system prompt): keep the end,
    # which holds the generation prompt the model must see.
    return ids[-budget:] if len(ids) > budget else ids


class _EventStop(StoppingCriteria):
    """Stops generation at the next token once any of the events is set."""

    def __init__(self, *events: threading.Event):
        self.events = events

    def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
        stop = any(event.is_set() for event in self.events)
        return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)


class _TextStop(StoppingCriteria):
    """Stops generation at the token whose text completes a stop string (one row).

    Checked on the decoded answer, the text the caller cuts, inside generate: the reader of
    the streamer lags behind, and the streamer holds text back until a word ends, so a
    stop seen there ends generation tokens late."""

    def __init__(self, tokenizer, prompt_tokens: int, stops: tuple[str, ...]):
        self.tokenizer, self.prompt_tokens, self.stops = tokenizer, prompt_tokens, stops

    def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
        # The whole answer each token (a few thousand characters at most, against a forward pass):
        # a character still incomplete in bytes decodes differently once its last byte comes.
        text = self.tokenizer.decode(input_ids[0, self.prompt_tokens:], skip_special_tokens=True)
        hit = any(stop in text for stop in self.stops)
        return torch.full((input_ids.shape[0],), hit, dtype=torch.bool, device=input_ids.device)


def generation_config_for(model, tokenizer, settings: GenerationSettings, max_new_tokens: int):
    """The model's own generation config with the user's settings on top."""
    config = copy.deepcopy(model.generation_config)
    config.eos_token_id = stop_token_ids(tokenizer, config) or None  # the one rule (backend/models/chat_templates.py)
    if config.pad_token_id is None:
        config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    config.max_new_tokens = max_new_tokens
    config.max_length = None
    config.repetition_penalty = settings.repetition_penalty
    if settings.min_new_tokens > 0:
        config.min_new_tokens = min(settings.min_new_tokens, max_new_tokens)
    if settings.greedy:
        # Neutral values, so transformers does not warn about unused sampling flags.
        config.update(do_sample=False, temperature=1.0, top_p=1.0, top_k=50)
    else:
        config.update(do_sample=True, temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k)
    return config


@dataclass
class Reply:
    text: str = ""
    new_tokens: int = 0
    seconds: float = 0.0
    finish: str = ""          # "eos" | "length" | "stopped" | "error"
    notices: list[Message] = field(default_factory=list)  # catalogued (backend/messages.py)
    error: str | None = None  # English (the command line); error_message: its id, for the Chat tab
    error_message: Message | None = None

    def fail(self, error: str | Message) -> None:
        self.finish, self.error, self.error_message = "error", str(error), message_of(error)

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0


def generate_stream(model, tokenizer, prompt: Prompt, settings: GenerationSettings,
                    stop: threading.Event, reply: Reply):
    """Yield the answer text as it grows; fill `reply` as generation goes.

    model.generate runs in a thread and feeds a TextIteratorStreamer; the caller
    iterates here. If the caller abandons the iterator, generation is stopped
    and its thread joined before this returns, so the model is free again."""
    streamer = TextIteratorStreamer(tokenizer, skip_prompt=True, skip_special_tokens=True)
    input_ids = prompt.input_ids.to(model.device)
    config = generation_config_for(model, tokenizer, settings, prompt.max_new_tokens)
    abandoned = threading.Event()
    criteria = StoppingCriteriaList([_EventStop(stop, abandoned)])
    if settings.stop_strings:
        criteria.append(_TextStop(tokenizer, input_ids.shape[1], settings.stop_strings))
    outcome: dict = {}

    def work() -> None:
        try:
            if not settings.greedy:
                torch.manual_seed(settings.seed)   # seeds every device's generator
            with torch.inference_mode():
                output = model.generate(
                    input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                    generation_config=config, streamer=streamer,
                    stopping_criteria=criteria,
                )
            outcome["new_tokens"] = int(output.shape[1] - input_ids.shape[1])
            outcome["last"] = int(output[0, -1])
        except Exception as error:  # noqa: BLE001 - reported to the user in the reply
            outcome["error"] = error
            streamer.end()

    start = time.perf_counter()
    thread = threading.Thread(target=work, name="chat-generate", daemon=True)
    thread.start()
    drained = False
    try:
        for piece in streamer:
            reply.text += piece
            yield reply.text
        drained = True
    finally:
        if not drained:
            abandoned.set()
        thread.join()
    reply.seconds = time.perf_counter() - start
    reply.new_tokens = outcome.get("new_tokens", 0)
    if "error" in outcome:
        reply.fail(_explain(outcome["error"]))
    elif stop.is_set():
        reply.finish = "stopped"
    elif reply.new_tokens >= prompt.max_new_tokens and outcome.get("last") not in _eos_ids(config):
        reply.finish = "length"
    else:
        reply.finish = "eos"
    yield reply.text


def _eos_ids(config) -> set[int]:
    """The ids generation_config_for set: the tokenizer's EOS and the generation config's."""
    eos = config.eos_token_id
    return set(eos) if isinstance(eos, (list, tuple)) else {eos}


def _explain(error: Exception) -> Message:
    text = str(error)
    if isinstance(error, torch.cuda.OutOfMemoryError) or "out of memory" in text.lower():
        return msg("chat.oom")
    return msg("chat.failed", kind=type(error).__name__, error=text)
