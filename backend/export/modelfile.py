"""An Ollama Modelfile whose TEMPLATE gives the text training's chat template gave.

Ollama writes prompts with Go templates, not Jinja, and falls back to a
default template when a Modelfile has none; a model without `PARAMETER stop`
for its end-of-turn token never stops. So each family below is a Go template
plus the same template in Python, and a family is used only when the Python
one renders sample conversations exactly as the run's tokenizer does (the
BOS token aside: llama.cpp adds it from the GGUF's metadata). A template
that inserts a default system prompt (SmolLM2's does) becomes `SYSTEM`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from backend.models.chat_templates import render

# Ollama's default num_ctx below 24 GiB of VRAM (its docs, context-length: 4k; 32k-256k above; 2048 in older releases): a Modelfile never gives a model less.
OLLAMA_CONTEXT = 4096
SAMPLES = (
    [{"role": "user", "content": "Hi there."}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}],
    [{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "4."},
     {"role": "user", "content": "And 3 + 3?"}],
)


def _turns(messages):
    return [m for m in messages if m["role"] != "system"]


def _chatml(system, messages) -> str:
    text = f"<|im_start|>system\n{system}<|im_end|>\n" if system else ""
    text += "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in _turns(messages))
    return text + "<|im_start|>assistant\n"


def _llama3(system, messages) -> str:
    text = f"<|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>" if system else ""
    text += "".join(f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content']}<|eot_id|>"
                    for m in _turns(messages))
    return text + "<|start_header_id|>assistant<|end_header_id|>\n\n"


def _gemma(system, messages) -> str:
    text = ""
    for i, m in enumerate(_turns(messages)):
        if m["role"] == "assistant":
            text += f"<start_of_turn>model\n{m['content']}<end_of_turn>\n"
        else:
            prefix = f"{system}\n\n" if system and i == 0 else ""
            text += f"<start_of_turn>user\n{prefix}{m['content']}<end_of_turn>\n"
    return text + "<start_of_turn>model\n"


@dataclass(frozen=True)
class Family:
    name: str
    go_template: str
    render: Callable[[str | None, list[dict]], str]
    default_system: re.Pattern | None = None  # finds a system prompt the template inserts by itself


FAMILIES = (
    Family("chatml", """{{- if .System }}<|im_start|>system
{{ .System }}<|im_end|>
{{ end }}
{{- range .Messages }}{{- if ne .Role "system" }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}{{- end }}<|im_start|>assistant
""", _chatml, re.compile(r"^<\|im_start\|>system\n(.*?)<\|im_end\|>\n", re.DOTALL)),
    Family("llama3", """{{- if .System }}<|start_header_id|>system<|end_header_id|>

{{ .System }}<|eot_id|>{{ end }}
{{- range .Messages }}{{- if ne .Role "system" }}<|start_header_id|>{{ .Role }}<|end_header_id|>

{{ .Content }}<|eot_id|>{{ end }}{{- end }}<|start_header_id|>assistant<|end_header_id|>

""", _llama3, re.compile(r"^<\|start_header_id\|>system<\|end_header_id\|>\n\n(.*?)<\|eot_id\|>", re.DOTALL)),
    Family("gemma", """{{- $first := true }}{{- range .Messages }}{{- if eq .Role "user" }}<start_of_turn>user
{{ if and $first $.System }}{{ $.System }}

{{ end }}{{ .Content }}<end_of_turn>
{{ $first = false }}{{- else if eq .Role "assistant" }}<start_of_turn>model
{{ .Content }}<end_of_turn>
{{ $first = false }}{{- end }}{{- end }}<start_of_turn>model
""", _gemma),
)


@dataclass
class TemplateMatch:
    family: Family | None
    system: str | None  # the template's own default system prompt, for SYSTEM
    reason: str = ""


def match_family(tokenizer) -> TemplateMatch:
    """The family whose Go template renders like the tokenizer's chat template, with its default system."""

    bos = tokenizer.bos_token or ""
    expected = [render(tokenizer, sample, add_generation_prompt=True) for sample in SAMPLES]
    for family in FAMILIES:
        found = family.default_system.match(expected[0]) if family.default_system else None
        default = found.group(1) if found else None
        rendered = [family.render(_system_of(sample) or default, sample) for sample in SAMPLES]
        # A template may write the BOS text itself; llama.cpp then adds it from the GGUF's metadata instead.
        if all(text in (want, bos + want) for want, text in zip(rendered, expected)):
            return TemplateMatch(family, default)
    return TemplateMatch(None, None, reason=expected[0][:200])


def _system_of(messages) -> str | None:
    return next((m["content"] for m in messages if m["role"] == "system"), None)


def stop_texts(tokenizer, stop_ids) -> list[str]:
    """The text of every stop token, for `PARAMETER stop` (Ollama matches stop strings in the output)."""
    texts = []
    for token_id in sorted(stop_ids):
        text = tokenizer.convert_ids_to_tokens(int(token_id))
        if text and text not in texts:
            texts.append(text)
    return texts


def modelfile_context(model_context: int, cutoff_len: int | None) -> int:
    """num_ctx: at least the run's cutoff_len (the longest text training saw) and Ollama's own default,
    never more than the model's context. Ollama cuts a longer prompt to num_ctx without a word, and
    allocates the KV cache of all of it: a 128k-context model would ask for gigabytes it rarely needs."""
    return min(model_context, max(cutoff_len or 0, OLLAMA_CONTEXT))


def build_modelfile(gguf_name: str, match: TemplateMatch, stops: list[str], num_ctx: int,
                    note: str | None = None) -> str:
    """`note`: a comment above FROM (why this file, when no level passed its check)."""
    lines = [*(f"# {line}" for line in (note or "").splitlines()), f"FROM ./{gguf_name}", ""]
    if match.family:
        lines += [f'TEMPLATE """{match.family.go_template}"""', ""]
    if match.system:
        lines += [f'SYSTEM """{match.system}"""', ""]
    lines += [f"PARAMETER num_ctx {num_ctx}"]
    # Written as they are: Ollama's parser takes a quoted value literally, without escapes, so `\"` would
    # stop on a backslash and a quote that the model never writes.
    lines += [f'PARAMETER stop "{text}"' for text in stops]
    return "\n".join(lines) + "\n"
