"""Token ids of a request's prompt: chat messages through the model's own chat
template (the same rendering as the Chat tab and `python -m backend.chat`),
a completion prompt as plain text or as the token ids it already is."""

from __future__ import annotations

from backend.serve.protocol import ApiError, Request


def prompt_ids(tokenizer, request: Request) -> list[int]:
    if request.kind == "chat":
        return chat_ids(tokenizer, request.messages, request.model)
    return completion_ids(tokenizer, request.prompt)


def completion_ids(tokenizer, prompt: str | list[int], where: str = "prompt") -> list[int]:
    """A completion prompt's token ids: ids as sent, text through the tokenizer (with the special tokens
    it adds itself, a BOS for Llama-style tokenizers, as vLLM does)."""
    if isinstance(prompt, list):
        vocabulary = len(tokenizer)
        if max(prompt) >= vocabulary:
            raise ApiError(400, f"'{where}' holds token id {max(prompt)}, but the model's vocabulary has "
                                f"{vocabulary} tokens (ids 0-{vocabulary - 1}).", param=where)
        return list(prompt)
    ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    if not ids:
        raise ApiError(400, f"'{where}' is empty: send some text to continue.", param=where)
    return list(ids)


def chat_ids(tokenizer, messages: list[dict], model_name: str) -> list[int]:
    if not getattr(tokenizer, "chat_template", None):
        raise ApiError(400, f"The model '{model_name}' has no chat template, so /v1/chat/completions cannot "
                            "format messages for it: use /v1/completions with a plain prompt.",
                       param="messages", code="no_chat_template")
    try:
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    except Exception as error:  # noqa: BLE001 - a template that rejects the conversation (e.g. role order)
        raise ApiError(400, f"The chat template of '{model_name}' refused these messages: {error}",
                       param="messages") from None
    if isinstance(ids, dict) or hasattr(ids, "keys"):   # some tokenizers return a BatchEncoding anyway
        ids = ids["input_ids"]
    return list(ids)
