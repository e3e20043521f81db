"""--engine vllm: the same names served by vLLM's own OpenAI server, the base
as `base` and each LoRA checkpoint as an adapter (`--enable-lora
--lora-modules name=path ...`). vLLM pins its own torch and transformers
(0.33.0: torch 2.14, transformers 5.20), so it lives in a virtual environment
of its own (requirements-vllm.txt): here its `vllm` command is only located
and started, never imported."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from backend.chat.targets import BASE, ChatTarget

VLLM_PIN = "vllm==0.33.0"   # keep equal to requirements-vllm.txt
# Where to look first: the command of vLLM's own environment (the Dockerfile sets it).
VLLM_ENV = "FINETUNE_STUDIO_VLLM"
INSTALL = (f"install it in a virtual environment of its own (it pins another torch): python3 -m venv /opt/vllm && "
           f"/opt/vllm/bin/pip install '{VLLM_PIN}', then export {VLLM_ENV}=/opt/vllm/bin/vllm (CUDA hosts only)")
# vLLM accepts these LoRA ranks for --max-lora-rank.
LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


class VllmError(ValueError):
    """vLLM cannot serve this here; the message says what to do."""


def vllm_executable() -> str | None:
    """The `vllm` command: $FINETUNE_STUDIO_VLLM, else on PATH, else beside this Python."""
    named = os.environ.get(VLLM_ENV)
    if named:
        return named if Path(named).is_file() else None
    beside = Path(sys.executable).with_name("vllm")
    return shutil.which("vllm") or (str(beside) if beside.is_file() else None)


def check_available() -> None:
    if vllm_executable() is None:
        raise VllmError(f"--engine vllm needs vLLM's `vllm` command, which was not found: {INSTALL}. "
                        "Or leave out --engine to serve with transformers.")


def lora_rank(folder: str) -> int:
    try:
        config = json.loads((Path(folder) / "adapter_config.json").read_text(encoding="utf-8"))
        return int(config.get("r", 8))
    except (OSError, ValueError, TypeError):
        return 8


def build_command(targets: dict[str, ChatTarget], host: str, port: int, api_key: str | None,
                  executable: str = "vllm") -> list[str]:
    """argv of `vllm serve` for `targets` (name -> target, the base under `base`)."""
    base = targets[BASE]
    full = [name for name, t in targets.items() if t.kind == "full"]
    if full:
        raise VllmError(f"{', '.join(full)} hold full weights, which vLLM cannot attach as LoRA adapters: leave "
                        "them out with --checkpoint NAME ..., or serve with --engine transformers.")
    adapters = {name: t for name, t in targets.items() if t.kind == "lora"}
    command = [executable, "serve", base.model, "--served-model-name", BASE, "--host", host, "--port", str(port)]
    if adapters:
        rank = max(lora_rank(t.checkpoint) for t in adapters.values())
        command += ["--enable-lora", "--max-lora-rank", str(next((r for r in LORA_RANKS if r >= rank), rank)),
                    "--max-loras", str(min(len(adapters), 8)),
                    "--lora-modules", *[f"{name}={t.checkpoint}" for name, t in adapters.items()]]
    if base.trust_remote_code:
        command.append("--trust-remote-code")
    if api_key:
        command += ["--api-key", api_key]
    return command


def device_env(device: str) -> dict:
    """cuda:N -> vLLM sees only GPU N."""
    if device.startswith("cuda:"):
        return {"CUDA_VISIBLE_DEVICES": device.split(":", 1)[1]}
    return {}


def exec_vllm(command: list[str], device: str) -> None:
    """Replace this process by vLLM (the pid a UI or a service manager holds stays the server's)."""
    executable = vllm_executable() or "vllm"
    env = {**os.environ, **device_env(device)}
    os.execvpe(executable, [executable, *command[1:]], env)
