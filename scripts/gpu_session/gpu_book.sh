#!/usr/bin/env bash
# Execute every notebook of the book in the gpu profile on a CUDA machine that has torch, triton and
# transformers but no jupyter and no internet, and pack the executed notebooks for the repository:
#
#   CRITSCALE_COMMIT=<sha> bash scripts/gpu_session/gpu_book.sh OUT_DIR [PROFILE [NOTEBOOK ...]]
#
# Needs the wheelhouse in .whl/ (`make gpu-wheelhouse` on a machine with PyPI; GPU_WHEELS overrides).
# Installs it into a private folder (no pip index, no virtual environment, nothing else changes), with
# critscale's own wheel (built there too, checked here against this tree: scripts/gpu_session/gpu_critscale_wheel.py)
# in a folder of its own, then runs scripts/gpu_session/gpu_book.py: a check that everything imports and
# every requirement of the wheels is met, the build driver's check of the recorded GPU results, the
# notebooks in parallel through the build driver as the Makefile runs them (`python -m critscale.bookbuild
# notebook NB --profile PROFILE`), 99_reproducibility last, and OUT_DIR/gpu_book.tar.gz with the executed
# notebooks, their results JSON and figures, their logs, and provenance.json (device, driver, versions,
# commit, date, wall time and status of each notebook).  OUT_DIR/gpu_book.log is the whole log.
# Back on any machine: `make gpu-book-import TAR=.../gpu_book.tar.gz`, then `make book PROFILE=gpu`.
# PROFILE defaults to gpu (which needs a CUDA device); another profile runs the same pipeline on the
# CPU with Triton's interpreter (a check of this script, see scripts/gpu_session/gpu_wheelhouse_check.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$(realpath -m "${1:?usage: gpu_book.sh OUT_DIR [PROFILE [NOTEBOOK ...]]}")
PROFILE=${2:-gpu}
shift $(( $# < 2 ? $# : 2 ))
PY=${PYTHON:-python3}
WHEELS=${GPU_WHEELS:-.whl}
SITE=$(mktemp -d "${TMPDIR:-/tmp}/critscale-book.XXXXXX")
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_book.log") 2>&1

if [ "$PROFILE" = gpu ]; then
  nvidia-smi -L || { echo "gpu_book: no CUDA device (nvidia-smi -L failed); the gpu profile needs one"; exit 2; }
fi
ls "$WHEELS"/*.whl >/dev/null 2>&1 || { echo "gpu_book: no wheels in $WHEELS (run make gpu-wheelhouse first)"; exit 2; }
deps=$(ls "$WHEELS"/*.whl | grep -v '/critscale-[^/]*\.whl$')
# shellcheck disable=SC2086
"$PY" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-compile --no-cache-dir \
  --target "$SITE/wheels" $deps
"$PY" scripts/gpu_session/gpu_critscale_wheel.py install "$WHEELS" "$SITE/pkg" || exit 2
export PYTHONPATH="$SITE/wheels:$SITE/pkg${PYTHONPATH:+:$PYTHONPATH}"
export CRITSCALE_ROOT=$PWD HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 PYDEVD_DISABLE_FILE_VALIDATION=1
if [ -z "${CRITSCALE_COMMIT:-}" ]; then  # a copy of the tree without .git must name its commit
  CRITSCALE_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || CRITSCALE_COMMIT+="+dirty"
fi
export CRITSCALE_COMMIT
unset MPLBACKEND  # the notebooks need IPython's inline backend for their figures
status=0
"$PY" scripts/gpu_session/gpu_book.py run --out "$OUT" --profile "$PROFILE" --site "$SITE/wheels" "$@" || status=$?
rm -rf "$SITE"
exit $status
