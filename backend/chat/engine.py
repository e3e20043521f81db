"""The chat engine: every base model loaded once per (model, device, bits),
each LoRA checkpoint attached to it as a named peft adapter, so switching
columns is `set_adapter`, not a reload. Full fine-tuning checkpoints are
models of their own (`plan()` tells their memory cost before loading), and an
exported GGUF file is answered by llama.cpp on the CPU, one row at a time
(backend/chat/gguf_generation.py), with the same prompt rules.

Not a singleton: whoever needs one creates it and owns it (the Chat tab makes
one per UI process in build(); the CLI one per command). All model work is
serialised by one lock, because the active adapter is model-wide state.

`max_adapters` bounds the adapters attached to one base (the API server
following a training run sees a new checkpoint every save_steps): the least
recently used one is deleted from the model when one more attaches, and a
later request for it attaches it again from its folder (a fraction of a
second). None (the Chat tab, the CLI): no bound, the user picked the columns.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import threading
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import torch
from safetensors import safe_open

from backend.chat.batch import adapter_names_for, generate_together, groups
from backend.chat.generation import (
    GenerationSettings,
    Prompt,
    Reply,
    build_messages,
    build_prompt,
    generate_stream,
)
from backend.chat.gguf_generation import load_gguf, stream_gguf
from backend.chat.targets import GGUF, ChatTarget
from backend.messages import Message, message_of, msg
from backend.models import loading
from backend.models.chat_templates import apply_for_model, fit_model

MIB = 2**20


@dataclass
class _Loaded:
    """A model in memory with its tokenizer and the adapters attached to it."""
    model: object
    tokenizer: object
    context_length: int
    # checkpoint folder -> adapter name, least recently used first (the order is the LRU)
    adapters: dict[str, str] = field(default_factory=dict)


def default_dtype(device: str) -> torch.dtype:
    if device.startswith("cuda"):
        index = int(device.split(":")[1]) if ":" in device else 0
        return torch.bfloat16 if torch.cuda.get_device_capability(index)[0] >= 8 else torch.float16
    return torch.float32


def weights_bytes(folder: str | Path, dtype: torch.dtype) -> int | None:
    """Bytes the weights in `folder` take once loaded in `dtype` (from safetensors headers)."""

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    numel = 0
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 - safe_open is not a dict
                numel += _prod(handle.get_slice(name).get_shape())
    return numel * torch.tensor([], dtype=dtype).element_size()


def _prod(shape) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def process_memory_mib(device: str) -> dict:
    """Process RSS (MiB) and, on a GPU, CUDA memory allocated / reserved (MiB)."""

    report = {"rss_mib": round(psutil.Process().memory_info().rss / MIB, 1)}
    if device.startswith("cuda") and torch.cuda.is_available():
        report["cuda_allocated_mib"] = round(torch.cuda.memory_allocated(device) / MIB, 1)
        report["cuda_reserved_mib"] = round(torch.cuda.memory_reserved(device) / MIB, 1)
    return report


def _release_freed_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    # glibc keeps freed heap pages in the process; malloc_trim hands them back to the OS.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class ChatEngine:
    def __init__(self, max_adapters: int | None = None) -> None:
        if max_adapters is not None and max_adapters < 1:
            raise ValueError(f"max_adapters must be 1 or more, not {max_adapters}")
        self.max_adapters = max_adapters
        self._lock = threading.Lock()
        self._bases: dict[tuple, _Loaded] = {}    # (model, device, bits, chat_template) -> base (+ adapters)
        self._full: dict[tuple, _Loaded] = {}     # (checkpoint, device) -> full model
        self._gguf: dict[str, _Loaded] = {}       # GGUF file -> llama.cpp model (the CPU, whatever the device)

    # ------------------------------------------------------------ loading

    def _base(self, target: ChatTarget, device: str) -> _Loaded:
        key = _base_key(target, device)
        if key not in self._bases:
            self._bases[key] = self._load(target.model, device, target.quantization_bits, target.trust_remote_code,
                                          chat_template=target.chat_template)
        return self._bases[key]

    def _load(self, path: str, device: str, bits: int | None, trust_remote_code: bool, tokenizer_from: str | None = None,
              chat_template: str = "auto") -> _Loaded:

        tokenizer = loading.load_tokenizer(tokenizer_from or path, trust_remote_code=trust_remote_code)
        # The run's template, as it trained (a base model without one gets the same known template;
        # tokens the template added grow the base before its adapters attach); a misfit raises here.
        plan = apply_for_model(tokenizer, chat_template, path)
        model = loading.load_model(path, quantization_bits=bits, dtype=default_dtype(device),
                                  device_map=device, trust_remote_code=trust_remote_code)
        model.eval()
        fit_model(model, plan, tokenizer)
        return _Loaded(model, tokenizer, _context_length(model, tokenizer))

    def _ensure(self, target: ChatTarget, device: str, keep: frozenset = frozenset()) -> _Loaded:
        """Load what `target` needs (once) and make it the active model; an eviction spares the
        checkpoint folders in `keep` (the other rows of the same batch)."""
        if target.kind == GGUF:
            if target.checkpoint not in self._gguf:
                self._gguf[target.checkpoint] = _Loaded(*load_gguf(target))
            return self._gguf[target.checkpoint]
        if target.kind == "full":
            key = (target.checkpoint, device)
            if key not in self._full:
                own = any((Path(target.checkpoint) / name).is_file() for name in loading.TOKENIZER_FILES)
                tokenizer_from = target.checkpoint if own else target.model
                self._full[key] = self._load(target.checkpoint, device, None, target.trust_remote_code, tokenizer_from)
            return self._full[key]
        loaded = self._base(target, device)
        if target.kind == "lora":
            self._attach(loaded, target, keep)
        return loaded

    def _attach(self, loaded: _Loaded, target: ChatTarget, keep: frozenset = frozenset()) -> None:
        from peft import PeftModel

        if target.checkpoint in loaded.adapters:
            loaded.adapters[target.checkpoint] = loaded.adapters.pop(target.checkpoint)   # most recently used
            return
        name = target.adapter_name()
        if isinstance(loaded.model, PeftModel):
            loaded.model.load_adapter(target.checkpoint, adapter_name=name, is_trainable=False)
        else:
            loaded.model = PeftModel.from_pretrained(loaded.model, target.checkpoint, adapter_name=name, is_trainable=False)
        loaded.model.eval()
        loaded.adapters[target.checkpoint] = name
        self._evict(loaded, keep | {target.checkpoint})

    def _evict(self, loaded: _Loaded, keep: frozenset) -> None:
        """Delete the least recently used adapters beyond max_adapters (never one in `keep`: a batch
        holding more distinct checkpoints than the bound stays above it until the next attach)."""
        if self.max_adapters is None or len(loaded.adapters) <= self.max_adapters:
            return
        for checkpoint in [c for c in loaded.adapters if c not in keep]:
            if len(loaded.adapters) <= self.max_adapters:
                break
            loaded.model.delete_adapter(loaded.adapters.pop(checkpoint))
        _release_freed_memory()

    def attached(self) -> list[str]:
        """Adapter names attached now, over every base, least recently used first (for /health)."""
        return [name for entry in list(self._bases.values()) for name in list(entry.adapters.values())]

    @contextlib.contextmanager
    def _activated(self, loaded: _Loaded, target: ChatTarget):
        """The base answers with adapters disabled; a LoRA column with its own adapter set."""
        from peft import PeftModel

        model = loaded.model
        if target.kind == "lora":
            model.set_adapter(loaded.adapters[target.checkpoint])
            yield model
        elif target.kind == "base" and isinstance(model, PeftModel):
            with model.disable_adapter():
                yield model
        else:
            yield model

    def prepare(self, targets: list[ChatTarget], device: str) -> None:
        """Load everything `targets` need now (the UI calls this before streaming)."""
        with self._lock:
            for target in targets:
                self._ensure(target, device)

    # ------------------------------------------------------------ generation

    def stream(self, target: ChatTarget, history: list[dict], user_text: str, settings: GenerationSettings,
               device: str = "cpu", stop: threading.Event | None = None, reply: Reply | None = None):
        """Yield `target`'s answer text as it grows; `reply` holds the result when done.

        `history` is this column's earlier turns ({"role", "content"} dicts)."""
        reply = reply if reply is not None else Reply()

        def make_prompt(tokenizer, context_length: int) -> Prompt:
            messages = build_messages(settings.system_prompt, history, user_text)
            prompt = build_prompt(tokenizer, messages, context_length, settings.max_new_tokens)
            reply.notices.extend(prompt.notices)
            return prompt

        yield from self.stream_prompt(target, make_prompt, settings, device, stop or threading.Event(), reply)

    def stream_prompt(self, target: ChatTarget, make_prompt, settings: GenerationSettings, device: str,
                      stop: threading.Event, reply: Reply):
        """Like stream(), for a caller that builds the prompt itself (the API server: raw
        completions, and a refusal instead of a cut when the prompt does not fit).
        `make_prompt(tokenizer, context_length)` returns a Prompt or raises."""
        with self._lock:
            loaded = self._ensure(target, device)
            prompt = make_prompt(loaded.tokenizer, loaded.context_length)
            with self._activated(loaded, target) as model:
                yield from _answer(target)(model, loaded.tokenizer, prompt, settings, stop, reply)

    @contextlib.contextmanager
    def using(self, target: ChatTarget, device: str):
        """(model, tokenizer, context length) of `target`, its adapter active, for a caller that runs the
        model itself (the API server's log-probabilities); the engine's lock is held meanwhile."""
        with self._lock:
            loaded = self._ensure(target, device)
            with self._activated(loaded, target) as model:
                yield model, loaded.tokenizer, loaded.context_length

    def stream_together(self, targets: list[ChatTarget], histories: list[list[dict]], user_text: str,
                        settings: GenerationSettings, device: str = "cpu", stop: threading.Event | None = None,
                        replies: list[Reply] | None = None):
        """Yield every column's answer text (a list in `targets` order) as they all grow.

        The base and the LoRA checkpoints on it answer in one batch (batch.py); what cannot
        share it answers group after group. A column whose model or prompt fails gets its
        error in `replies[i]`; the others go on."""
        replies = replies if replies is not None else [Reply() for _ in targets]
        stop = stop or threading.Event()
        with self._lock:
            entries, prompts = self._prepare_columns(targets, histories, user_text, settings, device, replies)
            yield from self._stream_groups(targets, entries, prompts, settings, stop, replies, skip_when_stopped=True)
        yield [reply.text for reply in replies]

    def _stream_groups(self, targets, entries, prompts, settings, stop, replies, skip_when_stopped: bool):
        """The loop both batched entry points share: yield every row's text (a list in `targets` order)
        as groups() answer one after another. With `skip_when_stopped` (the Chat tab's Stop), the groups
        not started yet when `stop` is set are not started: their replies say "stopped"."""
        texts = [""] * len(targets)
        for rows in groups(targets, entries, prompts, settings):
            if skip_when_stopped and stop.is_set():
                for index in rows:
                    replies[index].finish = "stopped"
                continue
            for partial in self._answer_rows(rows, targets, entries, prompts, settings, stop, replies):
                for index, text in zip(rows, partial):
                    texts[index] = text
                yield list(texts)

    def _answer_rows(self, rows, targets, entries, prompts, settings, stop, replies):
        """Yield the texts of `rows` (one group of groups()) as they grow: one generate batch, or for
        a GGUF file llama.cpp answering row after row. Closing it ends generation at once."""
        entry = entries[rows[0]]
        if targets[rows[0]].kind == GGUF:
            texts = [""] * len(rows)
            for position, index in enumerate(rows):
                with contextlib.closing(stream_gguf(entry.model, entry.tokenizer, prompts[index], settings, stop,
                                                    replies[index])) as stream:
                    for text in stream:
                        texts[position] = text
                        yield list(texts)
            return
        names = adapter_names_for(entry, [targets[i] for i in rows])
        activated = self._activated(entry, targets[rows[0]]) if names is None else contextlib.nullcontext(entry.model)
        with activated as model, contextlib.closing(generate_together(
                model, entry.tokenizer, [prompts[i] for i in rows], settings, stop, [replies[i] for i in rows],
                names)) as stream:   # closed at once if our caller stops listening: generation ends
            yield from stream

    def stream_prompts_together(self, targets: list[ChatTarget], make_prompts: list, settings: GenerationSettings,
                                device: str, stop, replies: list[Reply], errors: dict[int, Exception]):
        """stream_together for a caller that builds each prompt itself (the API server batching
        concurrent requests): `make_prompts[i](tokenizer, context_length)` returns a Prompt or
        raises; a row that raises is left out, its exception in `errors[i]`. Yields the rows' texts."""
        entries, prompts = [None] * len(targets), [None] * len(targets)
        keep = frozenset(t.checkpoint for t in targets if t.kind == "lora")
        with self._lock:
            for index, (target, make_prompt) in enumerate(zip(targets, make_prompts)):
                try:
                    entry = self._ensure(target, device, keep)
                    prompts[index] = make_prompt(entry.tokenizer, entry.context_length)
                    entries[index] = entry
                except Exception as error:  # noqa: BLE001 - this row's answer is its error; the others go on
                    errors[index] = error
            yield from self._stream_groups(targets, entries, prompts, settings, stop, replies, skip_when_stopped=False)

    def _prepare_columns(self, targets, histories, user_text, settings, device, replies):
        """Each column's loaded model and prompt (None where loading or templating failed: said in its reply)."""
        entries, prompts = [None] * len(targets), [None] * len(targets)
        for index, (target, history) in enumerate(zip(targets, histories)):
            try:
                entry = self._ensure(target, device)
                messages = build_messages(settings.system_prompt, history, user_text)
                prompts[index] = build_prompt(entry.tokenizer, messages, entry.context_length, settings.max_new_tokens)
                entries[index] = entry
                replies[index].notices.extend(prompts[index].notices)
            except Exception as error:  # noqa: BLE001 - a load failure names the model, the other columns go on
                replies[index].fail(message_of(error) or str(error))
        return entries, prompts

    def answer(self, target: ChatTarget, user_text: str, settings: GenerationSettings, device: str = "cpu",
               history: list[dict] | None = None) -> Reply:
        reply = Reply()
        for _ in self.stream(target, history or [], user_text, settings, device, reply=reply):
            pass
        return reply

    # ------------------------------------------------------------ memory

    def plan(self, targets: list[ChatTarget], device: str) -> list[str]:
        """What loading `targets` will cost on `device`, said before anything is loaded."""
        lines, seen = [], set()
        dtype = default_dtype(device)
        for target in targets:
            if target.kind == GGUF:
                state = "already in memory" if target.checkpoint in self._gguf else \
                    f"about {Path(target.checkpoint).stat().st_size / MIB:,.0f} MiB"
                lines.append(f"{target.label}: GGUF file, answered by llama.cpp on the CPU: {state}.")
                continue
            if target.kind == "full":
                key = ("full", target.checkpoint)
                loaded = (target.checkpoint, device) in self._full
                what = f"{target.label}: full fine-tuned model, loaded as its own copy"
            elif target.kind == "base" or _base_key(target, device) not in self._bases:
                key = ("base", target.model)
                loaded = _base_key(target, device) in self._bases
                name = target.name if target.origin else Path(target.model).name   # a hub snapshot's folder is a hash
                what = f"base model {name}" + (f" ({target.quantization_bits}-bit)" if target.quantization_bits else "")
            else:
                continue
            if key in seen:
                continue
            seen.add(key)
            if loaded:
                lines.append(f"{what}: already in memory on {device}.")
                continue
            folder = target.checkpoint if target.kind == "full" else target.model
            size = weights_bytes(folder, dtype) if Path(folder).is_dir() else None
            if size and target.kind != "full" and target.quantization_bits:
                size = size * target.quantization_bits // (8 * torch.tensor([], dtype=dtype).element_size())
            cost = f"about {size / MIB:,.0f} MiB" if size else "size unknown"
            lines.append(f"{what}: {cost} on {device}.")
        adapters = [t for t in targets if t.kind == "lora"]
        if adapters:
            lines.append(f"{len(adapters)} LoRA checkpoint(s) attach to their base as adapters: a few MiB each, no reload.")
        return lines

    def loaded(self) -> list[str]:
        lines = [f"{Path(model).name}" + (f" ({bits}-bit)" if bits else "") + f" on {device}"
                 + (f" + {len(entry.adapters)} adapter(s)" if entry.adapters else "")
                 for (model, device, bits, _), entry in self._bases.items()]
        lines += [f"{Path(ckpt).parent.name}/{Path(ckpt).name} (full) on {device}" for (ckpt, device) in self._full]
        lines += [f"{Path(file).name} (GGUF, llama.cpp) on cpu" for file in self._gguf]
        return lines

    def unload(self, device: str = "cpu") -> dict:
        """Drop every model, free the memory, and measure it (MiB before / after)."""
        with self._lock:
            before = process_memory_mib(device)
            count = len(self._bases) + len(self._full) + len(self._gguf)
            self._bases.clear()
            self._full.clear()
            for entry in self._gguf.values():
                entry.model.close()   # llama.cpp's memory is its own: the garbage collector does not see it
            self._gguf.clear()
            _release_freed_memory()
            return {"models": count, "before": before, "after": process_memory_mib(device)}


def _answer(target: ChatTarget):
    """The generation that streams this target's answer: llama.cpp for a GGUF file, else transformers."""
    return stream_gguf if target.kind == GGUF else generate_stream


def _base_key(target: ChatTarget, device: str) -> tuple:
    return (target.model, device, target.quantization_bits, target.chat_template)


def _context_length(model, tokenizer) -> int:
    """Tokens the model can attend to: its config's number, else the tokenizer's."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    limit = getattr(tokenizer, "model_max_length", None)
    return limit if isinstance(limit, int) and 0 < limit < 10**7 else 2048


def device_notice(device: str, busy: dict[str, str]) -> Message | None:
    """A sentence when a live training run holds GPU `device` (busy: device -> run id, from
    RunStore.busy_devices). The CPU is never refused: chatting with checkpoints while a CPU run
    trains is the point of the tab; it is only slower."""
    run_id = busy.get(device)
    if run_id is None or device == "cpu":
        return None
    return msg("chat.device_busy", run_id=run_id, device=device)
