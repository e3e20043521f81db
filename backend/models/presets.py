"""Known chat models by hub id, with the numbers of their published config.json.

The UI lists them, and the memory estimator uses them before a model is
downloaded. num_parameters is the model card's total (embeddings included).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelPreset:
    label: str
    num_parameters: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    context_length: int  # max_position_embeddings, tokens
    tie_word_embeddings: bool = True
    head_dim: int | None = None  # when it is not hidden_size / num_heads (Gemma 3: 256)


PRESETS: dict[str, ModelPreset] = {
    "Qwen/Qwen2.5-0.5B-Instruct": ModelPreset(
        "Qwen2.5 0.5B Instruct", 494_000_000, 896, 24, 14, 2, 4864, 151936, 32768),
    "Qwen/Qwen2.5-1.5B-Instruct": ModelPreset(
        "Qwen2.5 1.5B Instruct", 1_540_000_000, 1536, 28, 12, 2, 8960, 151936, 32768),
    "Qwen/Qwen2.5-7B-Instruct": ModelPreset(
        "Qwen2.5 7B Instruct", 7_620_000_000, 3584, 28, 28, 4, 18944, 152064, 32768, False),
    "meta-llama/Llama-3.2-1B-Instruct": ModelPreset(
        "Llama 3.2 1B Instruct", 1_240_000_000, 2048, 16, 32, 8, 8192, 128256, 131072),
    "meta-llama/Llama-3.2-3B-Instruct": ModelPreset(
        "Llama 3.2 3B Instruct", 3_210_000_000, 3072, 28, 24, 8, 8192, 128256, 131072),
    # The offline models (backend/models/offline.py), before their GGUF file is converted.
    "smollm2-135m-instruct": ModelPreset(
        "SmolLM2 135M Instruct (offline)", 134_515_008, 576, 30, 9, 3, 1536, 49152, 8192),
    "gemma-3-270m": ModelPreset(
        "Gemma 3 270M base (offline)", 268_098_176, 640, 18, 4, 1, 2048, 262144, 32768, head_dim=256),
    "HuggingFaceTB/SmolLM2-360M-Instruct": ModelPreset(
        "SmolLM2 360M Instruct", 362_000_000, 960, 32, 15, 5, 2560, 49152, 8192),
}
