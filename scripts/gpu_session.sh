#!/usr/bin/env bash
# One GPU session's work in one command of at most 10 minutes (the GPU machine's limit per command):
#
#   CRITSCALE_COMMIT=<sha> bash scripts/gpu_session.sh OUT_DIR
#
# 1. scripts/gpu_results.py: the kernel tests with CUDA, the Monte-Carlo and the benchmark with its
#    counters, written to results/gpu/ of this tree (so that the book below reads them) and packed as
#    OUT_DIR/gpu_results.tar.gz; it starts no new benchmark point after GPU_RESULTS_BUDGET_S (290 s).
# 2. scripts/gpu_book.sh: every notebook in the gpu profile, chapters in parallel, all done by
#    GPU_SESSION_S (570 s) after the start: OUT_DIR/gpu_book.tar.gz and OUT_DIR/gpu_book.log.
# GPU_SESSION_PARTS=results or =book runs one part only (default results,book).  GPU_SESSION_PARTS=gpt2 runs
# scripts/gpu_gpt2_session.sh instead (the attention diagnostic's GPU run, about 7 minutes: a command of its own;
# its header says how SmolLM2's weights get there).
# OUT_DIR/gpu_session.log is the whole log.  Back here: tar -xzf gpu_results.tar.gz -C results/gpu, and
# make gpu-book-import TAR=gpu_book.tar.gz.  Needs the wheelhouse in .whl/ (make gpu-wheelhouse).
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
OUT=$(realpath -m "${1:?usage: gpu_session.sh OUT_DIR}")
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_session.log") 2>&1
if [ -z "${CRITSCALE_COMMIT:-}" ]; then
  CRITSCALE_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || CRITSCALE_COMMIT+="+dirty"
fi
export CRITSCALE_COMMIT PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PARTS=${GPU_SESSION_PARTS:-results,book}
status=0
if [[ ,$PARTS, == *,results,* ]]; then
  python3 scripts/gpu_results.py --out results/gpu --budget-s "${GPU_RESULTS_BUDGET_S:-290}" || status=1
  files=$(cd results/gpu && ls kernels_tests.json kernels_tests.log kernels_montecarlo.json kernels_montecarlo.csv \
          kernels_bench.json kernels_bench.csv kernels_run.json 2>/dev/null)
  tar -czf "$OUT/gpu_results.tar.gz" -C results/gpu $files
  echo "[gpu_session] results packed after $(( $(date +%s) - START )) s:" $files
fi
if [[ ,$PARTS, == *,book,* ]]; then
  GPU_BOOK_DEADLINE=$(( START + ${GPU_SESSION_S:-570} )) bash scripts/gpu_book.sh "$OUT" gpu || status=1
fi
if [[ ,$PARTS, == *,gpt2,* ]]; then
  bash scripts/gpu_gpt2_session.sh run "$OUT" || status=1
fi
echo "[gpu_session] done in $(( $(date +%s) - START )) s, status $status"
exit $status
