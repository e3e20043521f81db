"""Tiny fast tokenizers built locally (no hub): a Qwen2-style ChatML template
and a Llama-style template that writes its own BOS."""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

CHATML = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

BOS_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "[{{ message['role'] }}] {{ message['content'] }}{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}\n"
    "{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"
)

CORPUS = [
    "The quick brown fox jumps over the lazy dog. Hello world, how are you today?",
    "Give three tips for staying healthy. Eat well, sleep, exercise every day.",
    "你好，我是一个人工智能助手。请问有什么可以帮您？生成发票 函数 调用 结果",
    '{"name": "generate_invoice", "arguments": {"customer_name": "John"}} 0123456789',
    "system user assistant tool observation Observation: Available tools",
]


def build_tokenizer(template: str = CHATML, vocab_size: int = 400) -> PreTrainedTokenizerFast:
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS * 5, trainer=trainer)
    bos, eos = ("<s>", "</s>") if template is BOS_TEMPLATE else (None, "<|im_end|>")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=bos, eos_token=eos, pad_token="<|endoftext|>", unk_token=None
    )
    fast.chat_template = template
    return fast
