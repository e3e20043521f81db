"""The model the 135M benches run on.

By default the real starter, SmolLM2-135M-Instruct (its weights, its 49,152-entry
tokenizer, its ChatML template with a default system prompt), resolved like any
run's model: `resolve_model_path("smollm2-135m-instruct", workspace/models)`,
converted once from the GGUF file its package ships (`make` installs it). Where
that package is not installed, the fallback below, with a note.

The fallback (and `build`): a folder with SmolLM2-135M's architecture (its
config numbers, random weights) and a tokenizer that gives realistic lengths: a
49,152-entry byte-level BPE trained with `tokenizers` on the shared instruction
files (../shared/data/*.json). The demo tokenizer (3,072 entries, trained on the
demo corpus) makes English rows about 3x longer than a real one.

    .venv/bin/python bench/real_size_model.py OUT_FOLDER [--tokenizer-from MODEL_FOLDER]

Used by bench/bench_real_size.py, step_profile.py and memory_vs_measured.py;
built once and reused (a BUILT marker).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
sys.path.insert(0, str(REPO))
STARTER = "smollm2-135m-instruct"  # the offline starter model (backend/models/offline.py)
ARCH_FOLDER = REPO / ".cache" / "smollm2-135m-arch"  # the random-weights fallback

# SmolLM2-135M's config.json numbers (a Llama architecture with tied embeddings).
SMOLLM2_135M = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192, rope_theta=100000.0,
                    rms_norm_eps=1e-5, tie_word_embeddings=True, hidden_act="silu", initializer_range=0.041666)


def instruction_texts() -> list[str]:
    """Every string value in the shared instruction files (alpaca, sharegpt, tool calls)."""
    texts: list[str] = []

    def walk(value):
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)

    for path in sorted(SHARED_DATA.glob("*.json")):
        walk(json.loads(path.read_text(encoding="utf-8")))
    return texts


def train_tokenizer(vocab_size: int = 49152):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from backend.models.demo import CHAT_TEMPLATE, ENDOFTEXT, IM_END, SPECIAL_TOKENS

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(instruction_texts(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=IM_END, pad_token=ENDOFTEXT,
                                        model_max_length=8192, padding_side="right",
                                        clean_up_tokenization_spaces=False)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build(folder: Path, seed: int = 0, tokenizer_from: Path | None = None) -> Path:
    """Build (once) and return the folder. `tokenizer_from`: another model folder's tokenizer
    (e.g. the demo model's, which makes rows about 3x longer) in place of the 49k BPE."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    folder = Path(folder)
    if (folder / "BUILT").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_from) if tokenizer_from else train_tokenizer()
    torch.manual_seed(seed)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = LlamaConfig(**{**SMOLLM2_135M, "vocab_size": len(tokenizer)},
                         bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"),
                         eos_token_id=eos, pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "BUILT").write_text("ok\n")
    return folder


def model_folder(path: Path | None) -> Path:
    """`--model PATH` (a model folder; built here with random weights when it has no config.json),
    or by default the real starter in the workspace's models folder, converted on first use."""
    if path is not None:
        return path if (path / "config.json").is_file() else build(path)
    from backend.models.loading import ModelLoadError, resolve_model_path
    from backend.runs.workspace import DEFAULT_WORKSPACE

    try:  # REPO / an absolute DEFAULT_WORKSPACE is that absolute path
        return Path(resolve_model_path(STARTER, REPO / DEFAULT_WORKSPACE / "models"))
    except ModelLoadError as error:
        print(f"{error}\nUsing SmolLM2-135M's architecture with random weights instead: {ARCH_FOLDER}",
              file=sys.stderr)
        return build(ARCH_FOLDER)


def describe(folder: Path) -> str:
    """Which model a bench ran on, for its report."""
    if (folder / "BUILT").is_file():
        return "SmolLM2-135M architecture (random weights, BPE trained here)"
    return f"{folder.name} (its own weights and tokenizer)"


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--tokenizer-from", type=Path, help="a model folder whose tokenizer to use")
    args = parser.parse_args()
    print(build(args.out, tokenizer_from=args.tokenizer_from))
