#!/usr/bin/env bash
# Every GPU-only result of the project, in one run on any CUDA machine:
#   bash scripts/gpu_run.sh OUT_DIR
# It needs python3 with torch, triton, transformers, numpy, scipy, pandas, pytest (no jupyter).
# critscale is made importable from a copy of the tree, so nothing is installed.
# Results (small JSON/CSV with provenance) land in OUT_DIR; `make gpu-results` uses results/gpu.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=$(realpath -m "${1:-results/gpu}")
mkdir -p "$OUT_DIR"
export TRITON_INTERPRET=0 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export CRITSCALE_ROOT=$PWD
export CRITSCALE_COMMIT=${CRITSCALE_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
SITE=$(mktemp -d)
cp -r src/critscale "$SITE/critscale"
cp -r kernels "$SITE/critscale/kernels"
export PYTHONPATH=$SITE
status=0
nvidia-smi -L || { echo "no CUDA device"; exit 2; }
python3 scripts/gpu_results.py --out "$OUT_DIR" ${GPU_RESULTS_ARGS:-} || status=1
python3 scripts/gpu_gpt2.py --out "$OUT_DIR" ${GPU_GPT2_ARGS:---minutes 4} || status=1
exit $status
