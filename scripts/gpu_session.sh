#!/usr/bin/env bash
# One GPU session's work in one command of at most 10 minutes (the GPU machine's limit per command):
#
#   CRITSCALE_COMMIT=<sha> bash scripts/gpu_session.sh OUT_DIR
#
# The parts run in priority order (GPU_SESSION_PARTS, a comma list, default results,book):
# 1. results: scripts/gpu_results.py: the kernel tests with CUDA, the benchmark (the kernels first, then
#    the counters, then the baselines) and the Monte-Carlo, written to results/gpu/ of this tree (so that
#    the book below reads them) and packed as OUT_DIR/gpu_results.tar.gz; no new benchmark point or
#    Monte-Carlo length starts after GPU_RESULTS_BUDGET_S (270 s).
# 2. book: scripts/gpu_book.sh: every notebook in the gpu profile, chapters in parallel, packed by
#    GPU_SESSION_S (570 s) after the start: OUT_DIR/gpu_book.tar.gz and OUT_DIR/gpu_book.log.  It runs only
#    when the results part succeeded (else the book would show failed or stale results: the command ends
#    early, and the session's time goes to a rerun of the results) and GPU_BOOK_MIN_S (200 s) are left.
# GPU_SESSION_PARTS=gpt2 runs scripts/gpu_gpt2_session.sh instead (the attention diagnostic's GPU run, about
# 7 minutes: a command of its own; its header says how SmolLM2's weights get there).
# OUT_DIR/gpu_session.log is the whole log.  Back here: make gpu-import DIR=<the folder with the tarballs>.
# CRITSCALE_COMMIT is required where the tree has no .git (the GPU machine gets a copy without it): the
# commit the results are recorded at, which the book's schema check requires to be a plain sha.
# Needs the wheelhouse in .whl/ (make gpu-wheelhouse) for the book part.
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
if ! [[ $CRITSCALE_COMMIT =~ ^[0-9a-f]{7,40}$ ]]; then
  echo "gpu_session: CRITSCALE_COMMIT is '$CRITSCALE_COMMIT', not a commit sha: run from a clean checkout, or"
  echo "  set CRITSCALE_COMMIT=<sha> (a copy of the tree without .git); results at another commit are refused"
  exit 2
fi
export CRITSCALE_COMMIT PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PARTS=${GPU_SESSION_PARTS:-results,book}
SESSION_S=${GPU_SESSION_S:-570}
elapsed() { echo $(( $(date +%s) - START )); }
status=0
results_ok=1
if [[ ,$PARTS, == *,results,* ]]; then
  python3 scripts/gpu_results.py --out results/gpu --budget-s "${GPU_RESULTS_BUDGET_S:-270}" || { status=1; results_ok=0; }
  files=$(cd results/gpu && ls kernels_tests.json kernels_tests.log kernels_montecarlo.json kernels_montecarlo.csv \
          kernels_bench.json kernels_bench.csv kernels_run.json 2>/dev/null)
  tar -czf "$OUT/gpu_results.tar.gz" -C results/gpu $files
  echo "[gpu_session] results packed after $(elapsed) s:" $files
fi
if [[ ,$PARTS, == *,book,* ]]; then
  left=$(( SESSION_S - $(elapsed) ))
  if [ "$results_ok" = 0 ]; then
    echo "[gpu_session] book not run: the results part failed (rerun it first: GPU_SESSION_PARTS=results)"
  elif [ "$left" -lt "${GPU_BOOK_MIN_S:-200}" ]; then
    echo "[gpu_session] book not run: $left s left before GPU_SESSION_S=$SESSION_S, fewer than ${GPU_BOOK_MIN_S:-200}"
    status=1
  else
    GPU_BOOK_DEADLINE=$(( START + SESSION_S )) bash scripts/gpu_book.sh "$OUT" gpu || status=1
  fi
fi
if [[ ,$PARTS, == *,gpt2,* ]]; then
  bash scripts/gpu_gpt2_session.sh run "$OUT" || status=1
fi
echo "[gpu_session] done in $(elapsed) s, status $status"
exit $status
