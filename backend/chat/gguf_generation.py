"""A GGUF file answering a chat column or an API request, through llama.cpp on the CPU.

The prompt rules stay the engine's (build_prompt's cut to the context, the server's
prompt_ids and its context refusal): they get `GGUFTokenizer`, the few calls of a
transformers tokenizer they make, answered with the run's template text and
llama.cpp's own tokens, so the prompt is the one a llama.cpp or Ollama user sends.
`stream_gguf` then plays generate_stream's part: the text as it grows, the Stop
event, stop strings ending generation at the token that completes one, and the
reply's token count, time and finish.

Greedy is the argmax of the logits (backend/models/gguf_engine.py): never
llama-cpp-python's own defaults (repeat_penalty 1.1, top_k 40).
"""

from __future__ import annotations

import codecs
import contextlib
import time

from backend.chat.generation import GenerationSettings, Prompt, Reply, _explain
from backend.chat.targets import ChatTarget
from backend.messages import msg
from backend.models.gguf_engine import GGUFModel
from backend.models.gguf_header import check_gguf_header
from backend.models.loading import ModelLoadError, load_tokenizer

# Tokens llama.cpp keeps room for (its KV cache is allocated up front): the file's trained
# context when shorter.
GGUF_CONTEXT = 4096


class GGUFTokenizer:
    """What build_prompt and the server's prompt_ids ask of a tokenizer, for a GGUF file."""

    def __init__(self, model, template_tokenizer=None):
        self.model, self.template_tokenizer = model, template_tokenizer
        self.name_or_path = str(model.path)
        own = model.metadata.get("tokenizer.chat_template")
        self.chat_template = getattr(template_tokenizer, "chat_template", None) if template_tokenizer else own

    def __len__(self) -> int:
        return self.model.llm.n_vocab()

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True, return_dict=False):
        if not add_generation_prompt:
            raise ValueError("a GGUF column renders generation prompts only")
        text = self.model.render(messages, self.template_tokenizer)
        return self.model.tokenize(text) if tokenize else text

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        # Special tokens written in the text are parsed, as transformers does; BOS as the file says.
        ids = self.model.llm.tokenize(text.encode("utf-8"), add_bos=add_special_tokens, special=True)
        return {"input_ids": list(ids)}

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return b"".join(self.model.piece(int(t)) for t in ids).decode("utf-8", errors="replace")


def load_gguf(target: ChatTarget):
    """(GGUFModel, GGUFTokenizer, context length) for a GGUF target; a missing binding or an
    unreadable file raises ModelLoadError with what to do."""

    try:
        import llama_cpp  # noqa: F401 - imported here only to say what to install when it is missing
    except ImportError:
        raise ModelLoadError(msg("chat.gguf.no_bindings", file=target.checkpoint)) from None
    context = min(GGUF_CONTEXT, trained_context(target.checkpoint) or GGUF_CONTEXT)
    try:
        model = GGUFModel(target.checkpoint, n_ctx=context)
    except (ValueError, OSError) as error:
        raise ModelLoadError(msg("chat.gguf.unreadable", file=target.checkpoint, error=str(error))) from None
    template = load_tokenizer(target.tokenizer) if target.tokenizer else None
    return model, GGUFTokenizer(model, template), context


def trained_context(path: str) -> int | None:
    """`<architecture>.context_length` from the file's header (read without loading the weights)."""
    try:
        from gguf import GGUFReader

        check_gguf_header(path)  # before gguf's reader, which trusts the header's counts
        reader = GGUFReader(path)
        architecture = reader.get_field("general.architecture").contents()
        field = reader.get_field(f"{architecture}.context_length")
        return int(field.contents()) if field is not None else None
    except Exception:  # noqa: BLE001 - an unreadable header: llama.cpp's own load then says what is wrong
        return None


def stream_gguf(model, tokenizer, prompt: Prompt, settings: GenerationSettings, stop, reply: Reply):
    """Yield the answer text as it grows; fill `reply` (its tokens, seconds and finish). Runs in the
    caller's thread: llama.cpp computes one token each time the caller asks for more text."""
    start = time.perf_counter()
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")   # a character may span tokens
    greedy = settings.greedy
    tokens = model.stream(prompt.input_ids[0].tolist(), prompt.max_new_tokens,
                          temperature=0.0 if greedy else settings.temperature, top_p=1.0 if greedy else settings.top_p,
                          top_k=0 if greedy else settings.top_k, seed=settings.seed,
                          repeat_penalty=settings.repetition_penalty, min_new_tokens=settings.min_new_tokens)
    try:
        with contextlib.closing(tokens):
            for token in tokens:
                reply.new_tokens += 1
                reply.text += text.decode(model.piece(token))
                yield reply.text
                if stop.is_set() or any(s in reply.text for s in settings.stop_strings):
                    break
    except Exception as error:  # noqa: BLE001 - said in the column / the API answer
        reply.fail(_explain(error))
    reply.seconds = time.perf_counter() - start
    if reply.finish != "error":
        reply.text += text.decode(b"", final=True)
        reply.finish = ("stopped" if stop.is_set() else
                        "length" if reply.new_tokens >= prompt.max_new_tokens else "eos")
    yield reply.text
