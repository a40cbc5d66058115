"""Triton kernels for attention-row statistics at GPU scale (``critscale.kernels``).

Three kinds, named ``scores``, ``qk`` and ``sampled`` everywhere (modules, kernels, entry points, the
``notes["kind"]`` of a result), one entry point each, all returning a :class:`RowStats` whose ``backend``
field says what ran (``"triton-cuda"``, ``"triton-interpreter"`` or ``"reference"``):

- :func:`scores_row_stats` — stored scores ``(..., n)`` (:mod:`.scores`; ``row_stats`` is the same function);
- :func:`qk_row_stats` — logits ``scale * q k^T`` made on the fly with tensor cores (:mod:`.qk`);
- :func:`sampled_row_stats` — rows of a :mod:`critscale.families` family generated in the kernel from a
  counter-based generator (:mod:`.sampled`, stream version :data:`GENERATOR_VERSION`).

The statistics are those of theory.md §3.1: ``log Z``, entropy, ``p_max`` and ``sum p^2`` on a beta grid,
gap counts ``N(t)`` on a threshold grid, the exact second gap, the range, and a bracket for ``kappa``
(:func:`kappa_bounds`, with the grid's factor bound).  Modules, in the order of the Triton tutorials:
:mod:`.tiles` (the ``@triton.jit`` tile functions the kinds share), :mod:`.ladder` (one exp2 per chain of
doubling betas), :mod:`.twopass` (the launch, once for the three kinds), :mod:`.rowstats` (the result and
its float64 finishing), :mod:`.dispatch` (backends, argument checks), then the kinds; :mod:`.sass` counts
the compiled instructions per score for sm_90a.

Triton has no CPU backend: on a machine without CUDA the kernels run in Triton's interpreter, which must
be switched on (``TRITON_INTERPRET=1``) *before* ``triton`` is first imported.  Importing this package
decides it with :func:`critscale.triton_backend.choose` (the one place that does), which sets it when
nothing has imported triton yet and raises a clear error when triton was already imported without it (for
example by ``transformers`` or ``torch.compile``).
"""

from __future__ import annotations

from critscale.triton_backend import choose as _choose_triton_backend

_choose_triton_backend()

from .dispatch import BACKENDS, INTERPRETER_MAX_SCORES  # noqa: E402
from .qk import qk_row_stats  # noqa: E402
from .rowstats import RowStats, kappa_bounds  # noqa: E402
from .sampled import GENERATOR_VERSION, sample_scores, sampled_row_stats  # noqa: E402
from .scores import row_stats, scores_row_stats  # noqa: E402

__all__ = ["BACKENDS", "GENERATOR_VERSION", "INTERPRETER_MAX_SCORES", "RowStats", "kappa_bounds", "qk_row_stats",
           "row_stats", "sample_scores", "sampled_row_stats", "scores_row_stats"]
