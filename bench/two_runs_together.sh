#!/usr/bin/env bash
# Two starter runs started in the same second, OMP_NUM_THREADS unset, from checkout CHECKOUT (this one
# by default; a `git worktree` of an older revision for the baseline): each run's thread choice, its
# changes, its training time, and the wall time of both (backend/training/threads.py).
#
#   bash bench/two_runs_together.sh [CHECKOUT] [OUT]
#
# The starter comes from the test suite's converted copy in the user cache.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
CHECKOUT=${1:-$REPO}
OUT=${2:-$(mktemp -d)}
MODEL=${FINETUNE_STUDIO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/finetune-studio}/test-models/smollm2-135m-instruct
rm -rf "$OUT" && mkdir -p "$OUT"
for n in 1 2; do
  mkdir -p "$OUT/ws$n/models" && ln -s "$MODEL" "$OUT/ws$n/models/smollm2-135m-instruct"
done
start=$(date +%s)
for n in 1 2; do
  (cd "$CHECKOUT" && env -u OMP_NUM_THREADS PYTHONPATH="$CHECKOUT" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false \
    "$REPO/.venv/bin/python" -m backend.train --workspace "$OUT/ws$n" --run-dir "$OUT/ws$n/runs/r" \
    --set max_steps=12 --set replay=off --set learning_report=false --set cutoff_len=128 --set save_steps=100 \
    --set stop_when_learned=false > "$OUT/log$n" 2>&1) &
done
wait
echo "both: $(( $(date +%s) - start )) s wall"
for n in 1 2; do
  echo "run $n:"
  grep -h "CPU thread" "$OUT/ws$n/runs/r/train.log" | sed 's/.*INFO /  /'
  "$REPO/.venv/bin/python" -c "import json, sys; d = json.load(open(sys.argv[1])); \
print(f\"  train {d['train_runtime_s']:.0f} s, {d['train_tokens_per_second']:.0f} tokens/s\")" "$OUT/ws$n/runs/r/summary.json"
done
