"""The model to train: base weights, then LoRA / QLoRA adapters or full.

Adapters are always created under peft's adapter name "default" with
`get_peft_model` on the *base* model; on resume the Trainer loads the
checkpoint's adapter weights into that same adapter (docs/LIBRARY_TRAPS.md, checkpoints and resume: a
custom adapter name breaks Trainer resume, and wrapping a model that already
carries a loaded adapter would replace its weights with fresh ones).
"""

from __future__ import annotations

import functools
import importlib.util

import torch

from backend.config import RunConfig
from backend.models.chat_templates import fit_model
from backend.models.loading import load_model

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def load_dtype(config: RunConfig, precision: str) -> torch.dtype:
    """Weights dtype at load time. Full fine-tuning keeps fp32 master weights
    (the Trainer's bf16 / fp16 is autocast); adapter methods load the frozen
    base in the compute precision to halve its memory."""
    if config.method == "full":
        return torch.float32
    return DTYPES[precision]


def attention_implementation(on_cuda: bool) -> str | None:
    """FlashAttention-2 (varlen kernels for packed rows) where it is installed on a GPU; else the model's default (sdpa)."""

    return "flash_attention_2" if on_cuda and importlib.util.find_spec("flash_attn") is not None else None


def build_model(config: RunConfig, model_path: str, precision: str, device_map=None, adapter=None,
                checkpointing: bool = False, attn_implementation: str | None = None, template=None, tokenizer=None):
    """Base model + the method's trainable part. Returns the model to hand to the Trainer.
    `adapter`: an existing LoRA folder to continue training (preference stages' init_adapter).
    `template`: the run's TemplatePlan (backend/models/chat_templates.py): tokens it added get
    embedding rows, trained with the adapter, and generation stops on its EOS."""

    bits = config.quantization_bits if config.method == "qlora" else None
    model = load_model(model_path, quantization_bits=bits, dtype=load_dtype(config, precision),
                       device_map=device_map, trust_remote_code=config.trust_remote_code,
                       attn_implementation=attn_implementation)
    model.config.use_cache = False  # the KV cache is useless in training and costs memory
    if template is not None:
        fit_model(model, template, tokenizer)
    if config.method == "full":
        return model
    if config.method == "qlora":
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(
            model, use_gradient_checkpointing=checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False})
    if adapter is not None:
        from backend.training.preference import continue_adapter

        return continue_adapter(model, adapter)
    from peft import get_peft_model

    new_tokens = template.added_token_ids if template is not None else None
    peft_model = get_peft_model(model, lora_config(config, new_tokens))
    if new_tokens:
        # The trained rows are saved as trainable tokens; peft's "auto" would also save the whole resized
        # embedding matrix (1.35 GB a checkpoint on gemma-3-270m). The other rows are the base's, and
        # every loader grows the base the same way (chat_templates.resize_embeddings).
        peft_model.save_pretrained = functools.partial(peft_model.save_pretrained, save_embedding_layers=False)
    return peft_model


def lora_config(config: RunConfig, new_token_ids: list[int] | None = None):
    """`new_token_ids`: rows added to the embeddings (a template's tokens): trained through peft's
    trainable_token_indices, which keeps only those rows trainable (and saves only them) instead
    of the whole embedding matrix that modules_to_save would copy (262k x 640 on gemma-3-270m)."""
    from peft import LoraConfig

    target = config.lora_target
    return LoraConfig(
        task_type="CAUSAL_LM",
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules="all-linear" if target == "all-linear" else list(target if isinstance(target, list) else [target]),
        use_rslora=config.use_rslora,
        use_dora=config.use_dora,
        trainable_token_indices=list(new_token_ids) if new_token_ids else None,
    )


def parameter_counts(model) -> dict:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return {"trainable_parameters": trainable, "total_parameters": total}
