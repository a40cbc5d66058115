"""Test-session environment: set before any test module imports triton or transformers."""

import os

# Under pytest-xdist (`make test` runs one worker per core) each worker and its children keep torch's and
# the BLAS's thread pools to one thread, set before anything imports numpy or torch: two workers each
# running a pool as wide as the machine would share its cores several times over.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_name, "1")

from critscale.triton_backend import choose  # noqa: E402

# Triton's interpreter unless TRITON_INTERPRET=0 is exported (a CUDA machine), chosen before the first
# `import triton` anywhere (transformers imports triton too).
choose(when_unset=True)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")  # pytest only; never exported to notebook kernels
# The tests' caches stay in the checkout's build/, as `make test` sets it (critscale.cache).
os.environ.setdefault("CRITSCALE_CACHE", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                      "build", "cache"))


import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CI_RESULTS = ROOT / "build" / "results" / "ci"


@pytest.fixture
def ci_results():
    """Load ``build/results/ci/<notebook>.json`` written by `make test`'s ci-profile book build.

    Skips (reported in the summary) when the notebook has not been executed, e.g. when
    pytest is run alone instead of through `make test`.
    """

    def load(notebook: str) -> dict:
        from critscale.page.pagedata import load_results

        path = CI_RESULTS / f"{notebook}.json"
        if not path.exists():
            pytest.skip(f"{path.relative_to(ROOT)} missing: run `make test` (it executes the ci profile first)")
        return load_results(notebook, CI_RESULTS)

    return load


def _notebook_of(request) -> str:
    """The ``NB`` a chapter test module names (the notebook whose ci page it reads)."""
    notebook = getattr(request.module, "NB", None)
    if notebook is None:
        pytest.fail(f"{request.module.__name__} asks for the page fixtures but names no notebook (NB = ...)")
    return notebook


@pytest.fixture
def page(request, ci_results):
    """The ``values`` the ci page of the requesting module's ``NB`` recorded (skips as ``ci_results`` does)."""
    return ci_results(_notebook_of(request))["values"]


@pytest.fixture
def params(request):
    """The ci parameters (``params/ci/<NB>.yaml``) of the requesting module's notebook."""
    import yaml

    from critscale.page.provenance import repo_root

    return yaml.safe_load((repo_root() / "params" / "ci" / f"{_notebook_of(request)}.yaml").read_text())
