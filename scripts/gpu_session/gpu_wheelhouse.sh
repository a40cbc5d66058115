#!/usr/bin/env bash
# The wheelhouse for executing the notebooks on the GPU machine (CPython 3.12, manylinux x86_64, offline):
#   bash scripts/gpu_session/gpu_wheelhouse.sh [DIR]        (`make gpu-wheelhouse`; DIR defaults to .whl, which git ignores)
# One wheel per name in scripts/gpu_session/gpu_wheelhouse.txt, at its version in constraints.txt, no dependencies
# resolved here (the list is the closure, minus what the GPU machine's image has), and critscale's own wheel.
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.whl}
PY=${PYTHON:-python3}
pins=()
while read -r name; do
  pattern=$(printf '%s' "$name" | sed -E 's/[-_.]+/[-_.]/g')
  pin=$(grep -i -E "^${pattern}==" constraints.txt) || { echo "gpu_wheelhouse: $name is not pinned in constraints.txt" >&2; exit 2; }
  pins+=("$pin")
done < <(grep -v -E '^\s*(#|$)' scripts/gpu_session/gpu_wheelhouse.txt)
rm -rf "$DIR" && mkdir -p "$DIR"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_26_x86_64 manylinux_2_24_x86_64 \
         manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux2010_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" -d "$DIR" "${pins[@]}"
count=$(ls "$DIR"/*.whl | wc -l)
[ "$count" -eq "${#pins[@]}" ] || { echo "gpu_wheelhouse: $count wheels for ${#pins[@]} names in $DIR" >&2; exit 1; }
# critscale itself, built from the tree by pip as pyproject.toml lays it out (the GPU scripts check it against
# the tree they run in before they install it)
"${VENV_PYTHON:-.venv/bin/python}" scripts/gpu_session/gpu_critscale_wheel.py build "$DIR"
echo "gpu_wheelhouse: $count wheels and critscale's, $(du -sh "$DIR" | cut -f1), in $DIR"
