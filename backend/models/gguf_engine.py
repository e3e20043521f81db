"""A GGUF file answered by llama.cpp (the `llama_cpp` bindings), greedily or sampled.

Used where a person wants to see what llama.cpp itself makes of an export:
the export's own check, a Chat column and `python -m backend.serve --gguf`.
The prompt is the chat template's text rendered by the run's tokenizer when
one is given (the template training used), else the GGUF's own
`tokenizer.chat_template`; llama.cpp tokenises it itself, as any llama.cpp
or Ollama user's prompt would be.

llama-cpp-python's sampling defaults are not greedy (`repeat_penalty` 1.1,
`top_k` 40): greedy here is the argmax of the logits, nothing else.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from backend.models.chat_templates import render

DEFAULT_CONTEXT = 2048


class GGUFModel:
    def __init__(self, path: str | Path, n_ctx: int = DEFAULT_CONTEXT, logits_all: bool = False,
                 threads: int | None = None, gpu_layers: int = 0):
        import llama_cpp

        self.path = Path(path)
        self.llm = llama_cpp.Llama(model_path=str(self.path), n_ctx=n_ctx, logits_all=logits_all, verbose=False,
                                   n_threads=threads or default_threads(), n_gpu_layers=gpu_layers, seed=0)
        self.metadata = dict(self.llm.metadata)
        self.stop_ids = stop_ids_of(self.llm, self.metadata)

    def close(self) -> None:
        self.llm.close()

    # ------------------------------------------------------------- text in, text out

    def tokenize(self, text: str) -> list[int]:
        """llama.cpp's tokens of a rendered prompt (special tokens parsed, no BOS added: the template has it)."""
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.piece(token) for token in ids).decode("utf-8", errors="replace").strip()

    def piece(self, token: int) -> bytes:
        """The bytes of one token (control tokens: none). llama-cpp-python's detokenize reads each
        piece into 32 bytes and slices a longer one wrongly; the buffer grows here instead."""

        import llama_cpp

        vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        size = 64
        while True:
            buffer = (ctypes.c_char * size)()
            n = llama_cpp.llama_token_to_piece(vocab, llama_cpp.llama_token(token), buffer, size, 0, False)
            if n >= 0:
                return bytes(buffer[:n])
            size = -n   # llama.cpp says how many bytes it needs

    def render(self, messages: list[dict], tokenizer=None) -> str:
        """The generation prompt: through the run's tokenizer when given, else the GGUF's own template."""
        if tokenizer is not None:
            return render(tokenizer, messages, add_generation_prompt=True)
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = self.metadata.get("tokenizer.chat_template")
        if not template:
            raise ValueError(f"{self.path.name} holds no tokenizer.chat_template")
        formatter = Jinja2ChatFormatter(template, eos_token=self._token_text("eos"), bos_token=self._token_text("bos"))
        return formatter(messages=messages).prompt

    def _token_text(self, which: str) -> str:
        token = self.metadata.get(f"tokenizer.ggml.{which}_token_id")
        return "" if token is None else self.llm.detokenize([int(token)], special=True).decode("utf-8", "replace")

    # ------------------------------------------------------------- ids in, ids out

    def greedy(self, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
        """Greedy continuation up to (not including) the first stop token."""
        return list(self.stream(prompt_ids, max_new_tokens, temperature=0.0))

    def stream(self, prompt_ids: list[int], max_new_tokens: int, temperature: float = 0.0, top_p: float = 1.0,
               seed: int = 0, top_k: int = 0, repeat_penalty: float = 1.0, min_new_tokens: int = 0):
        """Token ids one by one, stopping before a stop token (within the first `min_new_tokens` a stop
        token is passed on and generation goes on, as vLLM's ignore_eos does).
        Temperature 0 without a repeat penalty is the argmax of the logits. `top_k` 0 is off; a repeat
        penalty is llama.cpp's (the last 64 tokens it generated, not the prompt: transformers counts both)."""
        self.llm.reset()
        self.llm.set_seed(seed)
        if temperature <= 0 and repeat_penalty == 1.0:
            tokens = self._argmax_tokens(prompt_ids)
        else:
            # temp 0 makes llama.cpp's chain penalties -> greedy; min_p 0 and top_k 0 leave the distribution whole.
            tokens = self.llm.generate(prompt_ids, reset=True, temp=max(0.0, temperature), top_p=top_p, top_k=top_k,
                                       min_p=0.0, typical_p=1.0, repeat_penalty=repeat_penalty)
        # A token is evaluated only when the next one is asked for: none after the last.
        for made, token in enumerate(tokens):
            if int(token) in self.stop_ids and made >= min_new_tokens:
                return
            yield int(token)
            if made + 1 >= max_new_tokens:
                return

    def _argmax_tokens(self, prompt_ids: list[int]):
        import numpy as np

        self.llm.eval(prompt_ids)
        while True:
            token = int(np.argmax(self._last_logits()))
            yield token
            self.llm.eval([token])

    def _last_logits(self):
        import llama_cpp
        import numpy as np

        pointer = llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.llm.n_vocab(),))

    def logits(self, ids: list[int]):
        """Next-token logits at every position of `ids` (needs logits_all=True), shape (len(ids), vocab)."""
        self.llm.reset()
        self.llm.eval(ids)
        return self.llm.scores[: len(ids), :].copy()


def default_threads() -> int:
    """OMP_NUM_THREADS when set (the knob torch reads too), else every core this process may use.
    llama.cpp's threads wait by spinning: more threads than free cores made a 2-layer model 4x
    slower on a busy 2-core machine (9.0 s against 2.1 s for 32 tokens with one thread)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    asked = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, min(cores, int(asked))) if asked.isdigit() else cores


def stop_ids_of(llm, metadata: dict) -> set[int]:
    """EOS, EOT and every end-of-generation token llama.cpp knows for this vocabulary."""
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    ids = {int(metadata[key]) for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id")
           if metadata.get(key) is not None}
    ids.update(t for t in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t))
    return ids
