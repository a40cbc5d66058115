"""critscale: the executable companion to arXiv:2605.12697.

Hayase & Karakida, *A Unified Framework for Critical Scaling of Inverse Temperature
in Self-Attention* (2026).  The theory implemented here is our reconstruction of the
paper (see the book's introduction); each function's docstring names the result of
that reconstruction it implements.

Rows are the last axis of every array.  Entries equal to ``-inf`` are masked.
"""

from .gaps import accumulation_scale, gap_counts, legendre_transform, sorted_gaps
from .softmax import SoftmaxStats, softmax_stats
from .roots import beta_at_entropy, beta_at_max_weight
from . import families, limits, montecarlo, rules
from .pagedata import record, record_figure
from . import gpu_records, plotting, provenance, tables

__version__ = "0.1.0"

__all__ = [
    "accumulation_scale",
    "beta_at_entropy",
    "beta_at_max_weight",
    "families",
    "gpu_records",
    "gap_counts",
    "legendre_transform",
    "limits",
    "montecarlo",
    "plotting",
    "provenance",
    "record",
    "record_figure",
    "rules",
    "softmax_stats",
    "sorted_gaps",
    "tables",
    "SoftmaxStats",
]
