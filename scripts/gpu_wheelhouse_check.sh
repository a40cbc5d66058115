#!/usr/bin/env bash
# Check the wheelhouse and scripts/gpu_book.sh without a GPU: a CPython 3.12 (as on the GPU machine) with,
# in a private folder, the packages the GPU machine's image provides that the notebooks and the jupyter
# stack use (numpy, scipy, pandas, matplotlib, seaborn and the shared dependencies; not torch, which has no
# CPU wheel for 3.12 on PyPI), then gpu_book.sh in the ci profile on notebooks that need no torch.
#   bash scripts/gpu_wheelhouse_check.sh [OUT_DIR]      (needs python3.12 on the PATH or PYTHON312, and PyPI)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${1:-build/gpu-wheelhouse-check}")
PY312=${PYTHON312:-python3.12}
"$PY312" -c 'import sys; assert sys.version_info[:2] == (3, 12), sys.version' \
  || { echo "gpu_wheelhouse_check: $PY312 is not CPython 3.12"; exit 2; }
[ -d .whl ] || bash scripts/gpu_wheelhouse.sh .whl
IMAGE="$OUT/image-site"
rm -rf "$OUT" && mkdir -p "$IMAGE"
grep -v -E '^(torch|triton|nvidia)' constraints.txt > "$OUT/constraints.txt"
"$PY312" -m pip install --quiet --disable-pip-version-check --only-binary=:all: --target "$IMAGE" \
  -c "$OUT/constraints.txt" numpy scipy pandas matplotlib seaborn pyyaml packaging psutil pygments \
  python-dateutil typing-extensions attrs markdown-it-py tqdm requests click aiohttp
PYTHON="$PY312" PYTHONPATH="$IMAGE" GPU_BOOK_SKIP_IMPORTS=torch,transformers \
  bash scripts/gpu_book.sh "$OUT/book" ci 02_free_energy 10_rescaling_rules
tar -tzf "$OUT/book/gpu_book.tar.gz"
