#!/usr/bin/env bash
# ZeRO-3 + CPU offload and FSDP2 on one CUDA GPU (world size 1): LoRA and full
# runs of a Qwen2.5-0.5B-shaped model with random weights, save, resume, final/
# gathered and loaded back, peak memory against the estimate. At most ~8 min
# on one H200. Needs requirements-gpu.txt (deepspeed) installed.
#   bench/gpu_scale_check.sh            # on a GPU host
#   bench/gpu_scale_check.sh --dry-run  # any machine: configs, commands, guards
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
if [ "${1:-}" != "--dry-run" ]; then
  "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU here: use --dry-run')"
  "$PYTHON" -c "import deepspeed" 2>/dev/null || { echo "DeepSpeed missing: pip install -r requirements-gpu.txt"; exit 2; }
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
fi
exec timeout 480 "$PYTHON" bench/gpu_scale_check.py "$@"
