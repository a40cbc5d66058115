#!/usr/bin/env bash
# One GPU session's work in one command of at most 10 minutes (the GPU machine's limit per command):
#
#   CRITSCALE_COMMIT=<sha> bash scripts/gpu_session/gpu_session.sh OUT_DIR
#
# The parts run in priority order (GPU_SESSION_PARTS, a comma list, default results,book):
# 1. results: scripts/gpu_results.py: the kernel tests with CUDA, the benchmark (the kernels first, then
#    the counters, then the baselines) and the Monte-Carlo, written to results/gpu/ of this tree (so that
#    the book below reads them) and packed as OUT_DIR/gpu_results.tar.gz; no new benchmark point or
#    Monte-Carlo length starts after GPU_RESULTS_BUDGET_S (240 s), and the part is stopped at
#    GPU_RESULTS_LIMIT_S (budget + 30 s).  The files it has written are packed every GPU_PACK_EVERY_S (15 s)
#    while it runs, so a part stopped at its limit (or a command stopped at 600 s) still returns them.
# 2. book: scripts/gpu_session/gpu_book.sh: every notebook in the gpu profile, chapters in parallel, packed by
#    GPU_SESSION_S (570 s) after the start: OUT_DIR/gpu_book.tar.gz and OUT_DIR/gpu_book.log.  It runs only
#    when the results part succeeded (else the book would show failed or stale results: the command ends
#    early, and the session's time goes to a rerun of the results) and GPU_BOOK_MIN_S (200 s) are left.
# GPU_SESSION_PARTS=gpt2 runs scripts/gpu_session/gpu_gpt2_session.sh instead (the attention diagnostic's GPU run, about
# 7 minutes: a command of its own, stopped at GPU_GPT2_LIMIT_S (540 s); its header says how SmolLM2's
# weights get there).
# Before anything runs, the files the parts need are checked: the wheelhouse (.whl/*.whl, GPU_WHEELS) for the
# book, the two halves of SmolLM2's weights and the gguf wheel (.smol/a, .smol/b, GPU_SMOL) for gpt2
# (GPU_GPT2_SMOLLM2=none leaves the model out).  A missing file ends the command at once (exit 2).
# `bash scripts/gpu_session/gpu_session.sh --check` runs that check here, before a device call is made.
# A results part that fails ends the command early; the rerun (GPU_SESSION_PARTS=results, one more command)
# fits the 15 minutes of device time with at least 3 minutes to spare (tests/test_gpu_scripts.py).
# OUT_DIR/gpu_session.log is the whole log.  Back here: make gpu-import DIR=<the folder with the tarballs>.
# CRITSCALE_COMMIT is required where the tree has no .git (the GPU machine gets a copy without it): the
# commit the results are recorded at, which the book's schema check requires to be a plain sha.
# Needs the wheelhouse in .whl/ (make gpu-wheelhouse) for the book part, and critscale's wheel in it (which
# `make gpu-wheelhouse` builds from the tree) for the results and book parts: the parts import critscale as
# installed from that wheel, never from a copy of the tree.
set -uo pipefail
cd "$(dirname "$0")/../.."
PARTS=${GPU_SESSION_PARTS:-results,book}
WHEELS=${GPU_WHEELS:-.whl}
SMOL=${GPU_SMOL:-.smol}

# The carried files each part needs; prints one line per missing file.
missing_files() {
  if [[ ,$PARTS, == *,book,* ]] && ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    echo "the book part needs the wheelhouse: no .whl file in $WHEELS (make gpu-wheelhouse, then carry it)"
  fi
  if [[ ,$PARTS, == *,results,* || ,$PARTS, == *,book,* ]] && ! ls "$WHEELS"/critscale-*.whl >/dev/null 2>&1; then
    echo "the results and book parts need critscale's wheel: no critscale-*.whl in $WHEELS (make gpu-wheelhouse)"
  fi
  if [[ ,$PARTS, == *,gpt2,* ]] && [ "${GPU_GPT2_SMOLLM2:-}" != none ]; then
    for f in "$SMOL/a/gguf.part" "$SMOL/b/gguf.part" "$SMOL/b/gguf.sha256"; do
      [ -f "$f" ] || echo "the gpt2 part needs SmolLM2's weights: $f is missing (bash scripts/gpu_session/gpu_gpt2_session.sh stage)"
    done
    ls "$SMOL"/b/gguf-*.whl >/dev/null 2>&1 || echo "the gpt2 part needs the gguf wheel: no gguf-*.whl in $SMOL/b"
  fi
  if [[ ,$PARTS, == *,gpt2,* ]] && ! ls "$SMOL"/b/critscale-*.whl >/dev/null 2>&1; then
    echo "the gpt2 part needs critscale's wheel: no critscale-*.whl in $SMOL/b (bash scripts/gpu_session/gpu_gpt2_session.sh stage)"
  fi
}

if [ -z "${CRITSCALE_COMMIT:-}" ]; then
  CRITSCALE_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || CRITSCALE_COMMIT+="+dirty"
fi
if ! [[ $CRITSCALE_COMMIT =~ ^[0-9a-f]{7,40}$ ]]; then
  echo "gpu_session: CRITSCALE_COMMIT is '$CRITSCALE_COMMIT', not a commit sha: run from a clean checkout, or"
  echo "  set CRITSCALE_COMMIT=<sha> (a copy of the tree without .git); results at another commit are refused"
  exit 2
fi
missing=$(missing_files)
if [ -n "$missing" ]; then
  echo "$missing" | sed 's/^/gpu_session: /'
  echo "gpu_session: nothing was run (parts: $PARTS)"
  exit 2
fi
if [ "${1:-}" = --check ]; then
  echo "gpu_session: every file the parts $PARTS need is here"
  exit 0
fi
START=$(date +%s)
OUT=$(realpath -m "${1:?usage: gpu_session.sh OUT_DIR | --check}")
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_session.log") 2>&1
export CRITSCALE_COMMIT PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
SESSION_S=${GPU_SESSION_S:-570}
BUDGET_S=${GPU_RESULTS_BUDGET_S:-240}
RESULTS_LIMIT_S=${GPU_RESULTS_LIMIT_S:-$(( BUDGET_S + 30 ))}
RESULTS_DIR=${GPU_RESULTS_DIR:-results/gpu}
RESULTS_CMD=${GPU_RESULTS_CMD:-python3 scripts/gpu_results.py}
PACK_EVERY_S=${GPU_PACK_EVERY_S:-15}
elapsed() { echo $(( $(date +%s) - START )); }

# Pack the result files written since the session started (atomically: a half-written tarball never
# replaces a complete one).
STAMP=$(mktemp)
pack_results() {
  local files
  files=$(cd "$RESULTS_DIR" 2>/dev/null && find . -maxdepth 1 -type f -newer "$STAMP" \( -name 'kernels_*.json' \
          -o -name 'kernels_*.csv' -o -name 'kernels_*.log' \) -printf '%f\n' | sort)
  [ -n "$files" ] || return 0
  # shellcheck disable=SC2086
  tar -czf "$OUT/gpu_results.tar.gz.tmp" -C "$RESULTS_DIR" $files && mv "$OUT/gpu_results.tar.gz.tmp" "$OUT/gpu_results.tar.gz"
  echo "[gpu_session] packed after $(elapsed) s:" $files
}

status=0
results_ok=1
if [[ ,$PARTS, == *,results,* ]]; then
  mkdir -p "$RESULTS_DIR"
  # critscale from its carried wheel, checked against this tree (scripts/gpu_session/gpu_critscale_wheel.py)
  SITE=$(mktemp -d "${TMPDIR:-/tmp}/critscale-results.XXXXXX")
  python3 scripts/gpu_session/gpu_critscale_wheel.py install "$WHEELS" "$SITE" || { echo "[gpu_session] nothing was run"; exit 2; }
  # shellcheck disable=SC2086
  PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" timeout -k 10 "$RESULTS_LIMIT_S" $RESULTS_CMD --out "$RESULTS_DIR" --budget-s "$BUDGET_S" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep "$PACK_EVERY_S" & wait $! 2>/dev/null
    kill -0 "$pid" 2>/dev/null && pack_results
  done
  wait "$pid"
  rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "[gpu_session] the results part was stopped at its limit of $RESULTS_LIMIT_S s"
  fi
  [ "$rc" = 0 ] || { status=1; results_ok=0; }
  pack_results
  [ "$results_ok" = 1 ] || echo "[gpu_session] the results part failed (status $rc): rerun it in a command of its own" \
    "with GPU_SESSION_PARTS=results (at most $RESULTS_LIMIT_S s)"
fi
rm -f "$STAMP"
if [[ ,$PARTS, == *,book,* ]]; then
  left=$(( SESSION_S - $(elapsed) ))
  if [ "$results_ok" = 0 ]; then
    echo "[gpu_session] book not run: the results part failed (rerun it first: GPU_SESSION_PARTS=results)"
  elif [ "$left" -lt "${GPU_BOOK_MIN_S:-200}" ]; then
    echo "[gpu_session] book not run: $left s left before GPU_SESSION_S=$SESSION_S, fewer than ${GPU_BOOK_MIN_S:-200}"
    status=1
  else
    GPU_WHEELS=$WHEELS GPU_BOOK_DEADLINE=$(( START + SESSION_S )) bash scripts/gpu_session/gpu_book.sh "$OUT" gpu || status=1
  fi
fi
if [[ ,$PARTS, == *,gpt2,* ]]; then
  GPU_SMOL=$SMOL timeout -k 10 "${GPU_GPT2_LIMIT_S:-540}" bash scripts/gpu_session/gpu_gpt2_session.sh run "$OUT" || status=1
fi
echo "[gpu_session] done in $(elapsed) s, status $status"
exit $status
