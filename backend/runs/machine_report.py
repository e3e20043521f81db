"""What a bug report needs to know about this machine and install, read without importing torch
(the diagnostics zip, backend/runs/diagnose.py): library versions from the installed packages'
metadata, the CPU from /proc/cpuinfo, GPUs from the NVIDIA driver's files and nvidia-smi, RAM,
free disk, the OS and the environment variables the libraries read."""

from __future__ import annotations

import glob
import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import psutil

from backend.models.hardware import gpu_driver_present
from backend.runs.redaction import is_secret_env_name

# The distributions a run, the app or one of its jobs imports (requirements*.txt, the optional extras).
LIBRARIES = ("torch", "transformers", "peft", "trl", "accelerate", "datasets", "tokenizers", "safetensors",
             "huggingface_hub", "bitsandbytes", "liger-kernel", "deepspeed", "gradio", "llama_cpp_python", "gguf",
             "vllm", "ray", "lm_eval", "wandb", "tensorboard", "numpy", "psutil", "PyYAML", "sentencepiece",
             "protobuf", "plotly", "fastapi", "uvicorn", "pyarrow", "pandas")
# Environment variables that change what the libraries do; a name holding KEY, TOKEN, SECRET or PASSWORD is
# listed with its value redacted (backend/runs/redaction.py).
ENV_PREFIXES = ("CUDA_", "NVIDIA_", "HF_", "HUGGING", "TRANSFORMERS_", "PYTORCH_", "TORCH", "OMP_", "MKL_",
                "NCCL_", "FINETUNE_STUDIO_", "GRADIO_", "TOKENIZERS_", "ACCELERATE_", "WANDB_", "OLLAMA_",
                "LLAMA_", "VLLM_", "RAY_", "XDG_CACHE_HOME", "VIRTUAL_ENV", "PYTHONPATH", "LD_LIBRARY_PATH")
NVIDIA_SMI_QUERY = "index,name,memory.total,memory.used,driver_version,compute_cap"
NVIDIA_SMI_TIMEOUT_S = 10


def library_versions() -> dict[str, str | None]:
    """Distribution -> installed version, None when not installed (metadata only: nothing is imported)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict:
    """Model name, core counts and the kernel's CPU flags (which SIMD, AVX512-BF16, AMX the CPU has)."""
    model, flags = None, []
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() in ("flags", "Features") and not flags:  # Features: an ARM kernel's word
                flags = value.split()
    except OSError:
        pass  # not Linux: the model from platform, no flags
    return {"model": model, "logical_cores": os.cpu_count(), "physical_cores": psutil.cpu_count(logical=False),
            "flags": " ".join(flags)}


def gpu_info() -> dict:
    """The GPUs: the NVIDIA driver's own files (no process), and nvidia-smi's table when it is installed.
    "none" when no GPU driver is present (the same test backend/models/hardware.py makes)."""
    if not gpu_driver_present():
        return {"gpus": "none"}
    report: dict = {"driver": _read("/proc/driver/nvidia/version"),
                    "nvidia_driver_gpus": [_read(f) for f in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information"))]}
    smi = shutil.which("nvidia-smi")
    if smi is None:
        report["nvidia_smi"] = "not installed"
        return report
    try:
        result = subprocess.run([smi, f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv"], capture_output=True,
                                text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
        report["nvidia_smi"] = (result.stdout or result.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        report["nvidia_smi"] = f"could not run: {error}"
    return report


def hardware(workspace_root: Path) -> dict:
    memory = psutil.virtual_memory()
    try:
        disk = shutil.disk_usage(workspace_root)
        free = {"workspace_free_gb": round(disk.free / 2**30, 2), "workspace_total_gb": round(disk.total / 2**30, 2)}
    except OSError as error:
        free = {"workspace_free_gb": f"unknown: {error}"}
    return {"cpu": cpu_info(), **gpu_info(), "ram_total_gb": round(memory.total / 2**30, 2),
            "ram_available_gb": round(memory.available / 2**30, 2), **free}


def system(app_argv: list[str] | None, launch_command: list[str] | None) -> dict:
    """The OS, Python, the app's flags (or the run's launch command when the app's are not known)."""
    return {**os_info(), "python": sys.version, "executable": sys.executable,
            "app_flags": app_argv[1:] if app_argv else None,
            "app_flags_source": "app.py" if app_argv else "not recorded (the diagnostics were made outside the app)",
            "launch_command": launch_command, "environment": library_environment(os.environ)}


def os_info() -> dict:
    """The kernel from os.uname and the distribution from /etc/os-release. Not platform.platform(): on Linux
    it runs `uname -p` in a subprocess, for a field it then leaves out."""
    if not hasattr(os, "uname"):  # Windows
        return {"os": platform.platform(), "system": platform.system(), "release": platform.release(),
                "machine": platform.machine()}
    uname = os.uname()
    try:
        distribution = platform.freedesktop_os_release().get("PRETTY_NAME")
    except OSError:
        distribution = None
    return {"os": f"{uname.sysname}-{uname.release}-{uname.machine}", "system": uname.sysname,
            "release": uname.release, "version": uname.version, "machine": uname.machine,
            "distribution": distribution}


def library_environment(environ) -> dict[str, str]:
    return {name: "<redacted:env>" if is_secret_env_name(name) else value for name, value in sorted(environ.items())
            if name.startswith(ENV_PREFIXES) or is_secret_env_name(name)}


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
