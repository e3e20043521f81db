"""Chat templates for every model, and the ids generation stops on.

A RunConfig's `chat_template` names the template a run trains with:

* auto:   the model's own when its tokenizer has one; else a known template
          whose tokens the vocabulary already holds (Gemma's for gemma, Llama 3's
          for llama, ChatML where `<|im_start|>` exists), matched by architecture
          first, then by tokens; else ChatML with its two tokens added.
* own:    the model's own, refused with a sentence when it has none.
* gemma, llama3, chatml: that template; gemma and llama3 are refused when the
          vocabulary lacks their tokens, chatml adds its tokens when missing (the
          embeddings are resized and the new rows trained, `added_token_ids`).

`apply_template` is the one place the choice is made: the worker, the
evaluator, Chat (and so the API server), the Data tab's token counts and the
Train tab's model check all call it, so what the form says is what trains. It
also makes the template's turn terminator (`<end_of_turn>`, `<|eot_id|>`,
`<|im_end|>`) the tokenizer's EOS, and `stop_token_ids` is the one rule for
what generation stops on: the union of the tokenizer's EOS and the
generation config's ids.

Every known template marks the assistant tokens with {% generation %}, so
`apply_chat_template(..., return_assistant_tokens_mask=True)` works, as with
the demo model's template.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from backend.config_policy import ConfigError
from backend.messages import Message, msg

AUTO, OWN = "auto", "own"

# Gemma has no system role: its official template puts the system text at the top of the first user turn.
GEMMA = (
    "{{- bos_token }}"
    "{%- if messages and messages[0]['role'] == 'system' %}"
    "{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' %}{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set first_user_prefix = '' %}{%- set loop_messages = messages %}{%- endif %}"
    "{%- for message in loop_messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<start_of_turn>model\\n' }}"
    "{%- generation %}{{- message['content'] + '<end_of_turn>' }}{%- endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<start_of_turn>user\\n' + (first_user_prefix if loop.first else '') + message['content'] + '<end_of_turn>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}"
)
LLAMA3 = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{%- generation %}{{- message['content'] + '<|eot_id|>' }}{%- endgeneration %}"
    "{%- else %}"
    "{{- message['content'] + '<|eot_id|>' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
# ChatML as Qwen2 writes it; the demo model is built with it too (backend/models/demo.py).
CHATML = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{%- generation %}{{- message['content'] + '<|im_end|>' }}{%- endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@dataclass(frozen=True)
class KnownTemplate:
    name: str
    template: str
    tokens: tuple[str, ...]  # each must be one token of the vocabulary (chatml: added when missing)
    terminator: str          # ends an assistant turn: the EOS generation stops on
    model_types: tuple[str, ...]  # config.json model_type prefixes it is matched to first


KNOWN = {
    "gemma": KnownTemplate("gemma", GEMMA, ("<start_of_turn>", "<end_of_turn>"), "<end_of_turn>", ("gemma",)),
    "llama3": KnownTemplate("llama3", LLAMA3, ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
                            "<|eot_id|>", ("llama",)),
    "chatml": KnownTemplate("chatml", CHATML, ("<|im_start|>", "<|im_end|>"), "<|im_end|>", ("qwen",)),
}
# RunConfig.chat_template's choices: the model's own, a known one, or ChatML with its tokens added.
CHAT_TEMPLATES = (AUTO, OWN, *KNOWN)


class TemplateError(ConfigError):
    """A chat_template choice that does not fit the tokenizer; the message says what to choose."""


@dataclass
class TemplatePlan:
    """What `apply_template` chose and did."""
    choice: str               # the setting: auto, own, gemma, ...
    name: str                 # what was applied: own, gemma, llama3 or chatml
    reason: str               # own | asked | architecture | tokens | added
    eos_token: str | None     # the turn terminator, now the tokenizer's EOS
    eos_id: int | None
    added_tokens: list[str] = field(default_factory=list)  # added to the vocabulary (chatml fallback)
    added_token_ids: list[int] = field(default_factory=list)
    vocabulary_size: int = 0  # len(tokenizer) afterwards: the rows the embeddings need

    def describe(self) -> Message:
        """One sentence for the Plan, the log and the model check."""
        eos = f"{self.eos_token} (id {self.eos_id})" if self.eos_token else "no end-of-turn token"
        if self.name == OWN:
            return msg("template.plan.own", eos=eos)
        if self.added_tokens:
            return msg("template.plan.added", template=self.name, tokens=", ".join(self.added_tokens), eos=eos)
        return msg("template.plan.known", template=self.name, choice=self.choice, eos=eos,
                   why=msg(f"template.why.{self.reason}"))

    def as_dict(self) -> dict:
        return {"chat_template": self.name, "choice": self.choice, "reason": self.reason, "eos_token": self.eos_token,
                "eos_token_id": self.eos_id, "added_tokens": self.added_tokens}


def _single_id(tokenizer, token: str) -> int | None:
    """The id of `token` when the vocabulary holds it as one token, else None."""
    token_id = tokenizer.convert_tokens_to_ids(token)
    if token_id is None or (token_id == tokenizer.unk_token_id and token != tokenizer.unk_token):
        return None
    return token_id


def missing_tokens(tokenizer, known: KnownTemplate) -> list[str]:
    return [t for t in known.tokens if _single_id(tokenizer, t) is None]


def has_own_template(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def choose(tokenizer, choice: str, model_type: str | None = None) -> tuple[str, str]:
    """(template name, reason) for `choice`, without changing the tokenizer; raises TemplateError
    for a choice that does not fit."""
    if choice not in CHAT_TEMPLATES:
        raise TemplateError(msg("config.not_choice", name="chat_template", value=choice,
                                allowed=", ".join(CHAT_TEMPLATES)))
    own = has_own_template(tokenizer)
    if choice == OWN:
        if not own:
            raise TemplateError(msg("template.no_own"))
        return OWN, "own"
    if choice in KNOWN:
        lacking = missing_tokens(tokenizer, KNOWN[choice])
        if lacking and choice != "chatml":
            raise TemplateError(msg("template.misfit", template=choice, tokens=", ".join(lacking)))
        return choice, "added" if lacking else "asked"
    if own:
        return OWN, "own"
    kind = (model_type or "").lower()
    by_architecture = [k for k in KNOWN.values() if kind.startswith(k.model_types)]
    for known in [*by_architecture, *[k for k in KNOWN.values() if k not in by_architecture]]:
        if not missing_tokens(tokenizer, known):
            return known.name, "architecture" if known in by_architecture else "tokens"
    return "chatml", "added"


def apply_template(tokenizer, choice: str = AUTO, model_type: str | None = None) -> TemplatePlan:
    """Give `tokenizer` the chosen template and make its turn terminator the EOS (in place).

    For the chatml fallback the missing tokens are added: the caller resizes the model's
    embeddings (`resize_embeddings`) and trains the new rows (`added_token_ids`)."""
    name, reason = choose(tokenizer, choice, model_type)
    plan = TemplatePlan(choice=choice, name=name, reason=reason, eos_token=None, eos_id=None)
    if name == OWN:
        terminator = turn_terminator(tokenizer)
        if terminator is not None:
            tokenizer.eos_token = tokenizer.convert_ids_to_tokens(terminator)
    else:
        known = KNOWN[name]
        lacking = missing_tokens(tokenizer, known)
        if lacking:
            tokenizer.add_tokens(lacking, special_tokens=True)
            plan.added_tokens = lacking
            plan.added_token_ids = [tokenizer.convert_tokens_to_ids(t) for t in lacking]
        tokenizer.chat_template = known.template
        tokenizer.eos_token = known.terminator
    plan.eos_token, plan.eos_id = tokenizer.eos_token, tokenizer.eos_token_id
    plan.vocabulary_size = len(tokenizer)
    return plan


def model_type(model_path) -> str | None:
    """config.json's model_type (the text model's, for multimodal configs); None when unreadable."""

    try:
        config = json.loads((Path(model_path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return None
    return (config.get("text_config") or {}).get("model_type") or config.get("model_type")


def apply_for_model(tokenizer, choice: str, model_path) -> TemplatePlan:
    """apply_template with the architecture read from the model folder: what the worker, the
    evaluator, Chat and the Data tab call with a run's `chat_template`."""
    return apply_template(tokenizer, choice, model_type(model_path))


def fit_model(model, plan: TemplatePlan, tokenizer=None) -> None:
    """The model side of a plan: embeddings grown for added tokens, and (given the tokenizer) the
    generation config stopping on the template's EOS too. Call before attaching adapters."""
    if plan.added_tokens:
        resize_embeddings(model, plan.vocabulary_size)
    if tokenizer is not None:
        set_stop_ids(model, tokenizer)


PROBE = "Probe answer 7."


def turn_terminator(tokenizer) -> int | None:
    """The token that ends an assistant turn in the tokenizer's template: the special token right
    after a probe answer's text (whitespace between them skipped); None when there is none."""
    messages = [{"role": "user", "content": "Hello."}, {"role": "assistant", "content": PROBE}]
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False)
    except Exception:  # noqa: BLE001 - a template that needs other roles or arguments: nothing to tell
        return None
    at = text.rfind(PROBE)
    if at < 0:
        return None
    after = text[at + len(PROBE):].lstrip()
    ids = tokenizer(after, add_special_tokens=False)["input_ids"] if after else []
    if not ids:
        return None
    specials = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    return ids[0] if ids[0] in specials else None


def stop_token_ids(tokenizer, generation_config=None) -> list[int]:
    """What generation stops on: the tokenizer's EOS and every id of the generation config's
    eos_token_id (an int or a list), sorted. Chat, Evaluate, Export's check and the API server
    all stop on these (a model trained with a template ends its turns with the tokenizer's EOS,
    while a base model's generation_config.json often names only its document end)."""
    ids = set()
    if tokenizer is not None and tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    eos = getattr(generation_config, "eos_token_id", None) if generation_config is not None else None
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, (list, tuple)):
        ids.update(int(i) for i in eos if i is not None)
    return sorted(ids)


def resize_embeddings(model, vocabulary_size: int) -> None:
    """Grow the embeddings (and an untied output head) to `vocabulary_size` rows. The new rows are
    the mean of the old ones, the same in every process that loads the model (the trainer, Chat,
    Evaluate, Export), so an adapter's trained rows land on the same starting point."""
    import torch

    old = model.get_input_embeddings().weight.shape[0]
    if vocabulary_size <= old:
        return
    model.resize_token_embeddings(vocabulary_size, mean_resizing=False)
    with torch.no_grad():
        for layer in {id(m): m for m in (model.get_input_embeddings(), model.get_output_embeddings()) if m is not None}.values():
            layer.weight[old:] = layer.weight[:old].mean(dim=0, keepdim=True)


def set_stop_ids(model, tokenizer) -> list[int]:
    """generation_config.eos_token_id := the union of the tokenizer's EOS and the ids already there."""
    ids = stop_token_ids(tokenizer, model.generation_config)
    model.generation_config.eos_token_id = ids[0] if len(ids) == 1 else ids
    return ids


# ---------------------------------------------------------------- rendering a chat

def render(tokenizer, messages: list[dict], tools: list | None = None, add_generation_prompt: bool = False) -> str:
    """The chat template's text for `messages` (the string that gets tokenised)."""
    kwargs = {"tokenize": False, "add_generation_prompt": add_generation_prompt}
    if tools:
        kwargs["tools"] = tools
    return tokenizer.apply_chat_template(_plain(messages), **kwargs)


def _plain(messages: list[dict]) -> list[dict]:
    # Templates only know role/content; extra keys (ids, weights) are dropped.
    return [{"role": m["role"], "content": m["content"]} for m in messages]



# ---------------------------------------------------------------- the model check

def eos_warnings(tokenizer, folder) -> list[Message]:
    """Sentences when the folder's own template and its EOS ids disagree: the turn ends with a token
    that generation_config.json (config.json when there is none) does not stop on, or with none."""
    terminator = turn_terminator(tokenizer)
    if terminator is None:
        return [msg("template.no_terminator")]
    ids = _configured_eos(folder)
    if ids and terminator not in ids:
        return [msg("template.eos_not_at_turn_end", ids=", ".join(map(str, ids)), terminator_id=terminator,
                    terminator=tokenizer.convert_ids_to_tokens(terminator))]
    return []


def _configured_eos(folder) -> list[int]:
    for name in ("generation_config.json", "config.json"):
        try:
            eos = json.loads((Path(folder) / name).read_text(encoding="utf-8")).get("eos_token_id")
        except (OSError, ValueError, AttributeError):
            continue
        if eos is not None:
            return [eos] if isinstance(eos, int) else [int(i) for i in eos if i is not None]
    return []
