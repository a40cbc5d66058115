"""critscale: the executable companion to arXiv:2605.12697.

Hayase & Karakida, *A Unified Framework for Critical Scaling of Inverse Temperature
in Self-Attention* (2026).  The theory implemented here is our reconstruction of the
paper (see the book's introduction); each function's docstring names the result of
that reconstruction it implements.

Rows are the last axis of every array.  Entries equal to ``-inf`` are masked.

The theory modules sit at the top level, in the book's order; the page-making modules (recorded numbers, figures,
tables, provenance, GPU results, the result map) are :mod:`critscale.page`, re-exported here (``cs.record``,
``cs.plotting``, ...); :mod:`.diagnostic`, :mod:`.models`, :mod:`.trainer` (the book's own language model) and
:mod:`.bookbuild` are subpackages.

The map of every result of the book to the chapter that states it (its ``prf`` label), the functions that
implement it and the tests that check it is the table :data:`critscale.page.resultmap.RESULTS`.
``tests/test_results_table.py`` checks it against the chapters and the tests; the reproducibility page lists it.
"""
from .gaps import accumulation_scale, gap_counts, in_units, legendre_transform, sorted_gaps
from .softmax import SoftmaxStats, softmax_stats
from .roots import beta_at_entropy, beta_at_max_weight
from . import (bounds, crossover, extrapolation, families, fitting, limits, montecarlo, planted, profiles,
               quantile_rows, rules)
from .page import gpu_results, keys, pagedata, plotting, provenance, reader_names, resultmap, tables
from .page.pagedata import record, record_figure

__version__ = "0.1.0"


def __getattr__(name: str):
    """``critscale.diagnose`` (:func:`critscale.diagnostic.pipeline.diagnose`), imported when first used."""
    if name == "diagnose":
        from .diagnostic.pipeline import diagnose

        return diagnose
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "accumulation_scale",
    "beta_at_entropy",
    "beta_at_max_weight",
    "bounds",
    "crossover",
    "diagnose",
    "extrapolation",
    "families",
    "fitting",
    "gpu_results",
    "gap_counts",
    "in_units",
    "keys",
    "legendre_transform",
    "limits",
    "montecarlo",
    "pagedata",
    "planted",
    "plotting",
    "profiles",
    "provenance",
    "quantile_rows",
    "reader_names",
    "record",
    "record_figure",
    "resultmap",
    "rules",
    "softmax_stats",
    "sorted_gaps",
    "tables",
    "SoftmaxStats",
]
