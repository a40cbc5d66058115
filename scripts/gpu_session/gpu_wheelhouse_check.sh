#!/usr/bin/env bash
# Check the wheelhouse and scripts/gpu_session/gpu_book.sh without a GPU: a CPython 3.12 (as on the GPU machine) with,
# in a private folder, the packages the GPU machine's image provides that the notebooks and the jupyter
# stack use (numpy, scipy, pandas, matplotlib, seaborn and the shared dependencies; not torch, which has no
# CPU wheel for 3.12 on PyPI), then gpu_book.sh in the ci profile on notebooks that need no torch: the
# preflight, the build driver's check of results/gpu, the notebooks through the build driver
# (python -m critscale.bookbuild notebook), the tarball; then the tarball's contents are listed and checked
# (every chosen notebook executed, its results and the provenance packed, no absolute machine path).
#   bash scripts/gpu_session/gpu_wheelhouse_check.sh [OUT_DIR]      (`make gpu-wheelhouse-check`; needs python3.12 on the
#                                                        PATH or PYTHON312, and PyPI)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$(realpath -m "${1:-build/gpu-wheelhouse-check}")
PY312=${PYTHON312:-python3.12}
"$PY312" -c 'import sys; assert sys.version_info[:2] == (3, 12), sys.version' \
  || { echo "gpu_wheelhouse_check: $PY312 is not CPython 3.12"; exit 2; }
[ -d .whl ] || bash scripts/gpu_session/gpu_wheelhouse.sh .whl
"${VENV_PYTHON:-.venv/bin/python}" scripts/gpu_session/gpu_critscale_wheel.py build .whl  # critscale as the tree is now
IMAGE="$OUT/image-site"
rm -rf "$OUT" && mkdir -p "$IMAGE"
grep -v -E '^(torch|triton|nvidia)' constraints.txt > "$OUT/constraints.txt"
"$PY312" -m pip install --quiet --disable-pip-version-check --only-binary=:all: --target "$IMAGE" \
  -c "$OUT/constraints.txt" numpy scipy pandas matplotlib seaborn pyyaml packaging psutil pygments \
  python-dateutil typing-extensions attrs markdown-it-py tqdm requests click aiohttp
PYTHON="$PY312" PYTHONPATH="$IMAGE" GPU_BOOK_SKIP_IMPORTS=torch,transformers \
  bash scripts/gpu_session/gpu_book.sh "$OUT/book" ci 02_free_energy 10_rescaling_rules
tar -tzf "$OUT/book/gpu_book.tar.gz"
"$PY312" - "$OUT/book/gpu_book.tar.gz" 02_free_energy 10_rescaling_rules <<'EOF'
import json, sys, tarfile
tar = tarfile.open(sys.argv[1])
names = set(tar.getnames())
prov = json.load(tar.extractfile("provenance.json"))
problems = [f"{nb}: {prov['notebooks'].get(nb, {}).get('status')}" for nb in sys.argv[2:]
            if prov["notebooks"].get(nb, {}).get("status") != "ok"]
problems += [f"{f} not packed" for nb in sys.argv[2:] for f in (f"executed/{nb}.ipynb", f"results/{nb}.json")
             if f not in names]
for member in tar.getmembers():
    if member.isfile() and member.name.endswith((".ipynb", ".json")):
        text = tar.extractfile(member).read().decode()
        problems += [f"{member.name}: machine path {p}" for p in ("/tmp/", "/root/", "/work/", "/home/") if p in text]
print("gpu_wheelhouse_check: " + ("; ".join(problems) if problems else
      f"ok: {len(sys.argv) - 2} notebooks executed through the build driver and packed"))
sys.exit(1 if problems else 0)
EOF
