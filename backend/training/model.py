"""The model to train: base weights, then LoRA / QLoRA adapters or full.

Adapters are always created under peft's adapter name "default" with
`get_peft_model` on the *base* model; on resume the Trainer loads the
checkpoint's adapter weights into that same adapter (DESIGN section 8: a
custom adapter name breaks Trainer resume, and wrapping a model that already
carries a loaded adapter would replace its weights with fresh ones).
"""

from __future__ import annotations

import torch

from backend.config import RunConfig

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
    import importlib.util

    return "flash_attention_2" if on_cuda and importlib.util.find_spec("flash_attn") is not None else None


def build_model(config: RunConfig, model_path: str, precision: str, device_map=None, adapter=None,
                checkpointing: bool = False, attn_implementation: str | None = None):
    """Base model + the method's trainable part. Returns the model to hand to the Trainer.
    `adapter`: an existing LoRA folder to continue training (preference stages' init_adapter)."""
    from backend.models.loading import load_model

    bits = config.quantization_bits if config.method == "qlora" else None
    model = load_model(model_path, quantization_bits=bits, dtype=load_dtype(config, precision),
                       device_map=device_map, trust_remote_code=config.trust_remote_code,
                       attn_implementation=attn_implementation)
    model.config.use_cache = False  # the KV cache is useless in training and costs memory
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

    return get_peft_model(model, lora_config(config))


def lora_config(config: RunConfig):
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
    )


def parameter_counts(model) -> dict:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return {"trainable_parameters": trainable, "total_parameters": total}
