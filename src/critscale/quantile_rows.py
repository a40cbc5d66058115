"""The quantile row of a score family and its accumulation scale: the finite-n ladder (chapter 05).

The deterministic scale :math:`\\bar\\kappa_n = nf(u_n)` of a family is the slope of
:math:`\\log N_n(t)` at :math:`t = 0`.  The robust scale :math:`\\kappa_{n,K}` reads :math:`\\log N_n` at
the :math:`K`-th gap and beyond, where :math:`\\log N_n` has already bent away from that slope; at
practical lengths the bend changes the growth exponent (``rem-05-quantile-row``, heuristic, ours).

The *quantile row* of length :math:`n` replaces the :math:`k`-th largest score of a random row by
the quantile at the mean of the :math:`k`-th largest of :math:`n` uniforms,
:math:`F^{-1}(1 - k/(n+1))`, :math:`k = 1, \\dots, n`.  For the planted families (a top score above a
bulk of :math:`n - 1` i.i.d. scores) the top score stays where it is and the bulk is replaced by its
quantiles at :math:`k/n`, :math:`k = 1, \\dots, n - 1`.  Its accumulation scale
:math:`\\tilde\\kappa_{n,K}` (:func:`quantile_row_scale`) is deterministic: it keeps the finite-n
shape of :math:`\\log N_n` and drops the :math:`n`-free random factor of the limit law.

Two closed forms (both in the tests):

- exponential scores, :math:`\\bar F(x) = e^{-x}`: the gaps are exactly :math:`\\log k`, so
  :math:`\\tilde\\kappa_{n,K} = 1 = \\bar\\kappa_n` for every ``n`` and ``K``;
- the endpoint family ``edge``, :math:`\\bar F(-u) = e^{-1/u}`: with :math:`L = \\log(n+1)` the gap to
  the :math:`k`-th score is :math:`\\log k/(L(L - \\log k))`, so
  :math:`\\tilde\\kappa_{n,K} = L(L - \\log K)`, whose slope in :math:`\\log\\log n` is
  :math:`1 + L/(L - \\log K) > 2` at every finite ``n``.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

from ._validate import as_K, as_integer
from .families import Family, get
from .gaps import accumulation_scale

__all__ = ["quantile_row", "quantile_row_scale"]


def _bulk_quantiles(n: int, count: int) -> np.ndarray:
    """Means of the first ``count`` descending order statistics of ``n - 1`` uniforms: ``1 - k/n``."""
    return 1.0 - np.arange(1, count + 1) / n  # (count,)


def _top_entries(fam: Family, n: int, count: int) -> np.ndarray:
    """The first ``count`` entries (``count <= n``) of the quantile row, descending: ``(count,)``."""
    if fam.iid:
        return np.asarray(fam.quantile((n + 1.0) / np.arange(1, count + 1)), dtype=np.float64)
    keys = set(fam.params)
    bulk = _bulk_quantiles(n, count - 1)  # (count-1,)
    if fam.domain == "step" and keys == {"g", "w"}:
        top, rest = fam.params["g"], -fam.params["w"] * (1.0 - bulk)
    elif fam.domain == "step" and keys == {"c", "w"}:
        top, rest = fam.params["c"] / np.log(n), -fam.params["w"] * (1.0 - bulk)
    elif fam.domain == "step" and keys == {"rho", "eta"}:
        top, rest = 1.0, fam.params["rho"] + fam.params["eta"] * (2.0 * bulk - 1.0)
    else:
        raise ValueError(f"{fam.name}: no quantile row (neither i.i.d. nor a planted family with a uniform bulk)")
    return np.concatenate([[top], rest])


def quantile_row(family: Union[str, Family], n: int) -> np.ndarray:
    """The quantile row of ``family`` at length ``n``, in descending order: ``(n,)`` float64.

    i.i.d. families: :math:`s_k = \\bar F^{-1}(k/(n+1))`, ``k = 1..n`` (``family.quantile((n+1)/k)``).
    ``planted(g, w)`` and ``planted_shrink(c, w)``: the top score (:math:`g`, or :math:`c/\\log n`)
    followed by :math:`-w\\,k/n`, ``k = 1..n-1``; ``simplex(rho, eta)``: 1 followed by
    :math:`\\rho + \\eta(1 - 2k/n)`.  ``ValueError`` for any other family (e.g. a step family this
    module does not know the bulk of) and for ``n < 2``.

    Test: ``tests/test_quantile_rows.py::test_quantile_row_entries`` (the entries against the
    families' own quantile functions and laws; the plotting position :math:`(k - 1/2)/n` instead of
    :math:`k/(n+1)` fails, as does an ascending row).
    """
    fam = get(family)
    n = as_integer(n, f"{fam.name}: n", max(2, fam.min_n))
    return _top_entries(fam, n, n)


_FIRST_PREFIX = 4096  # entries evaluated before the first attempt to certify the supremum


def _scale(fam: Family, n: int, K: int) -> float:
    """kappa_K of the quantile row, from the shortest prefix that certifies the supremum.

    The row is strictly decreasing, so the counts N of its first m entries are those of the whole row,
    and for k > m, log k / Delta_(k) <= log n / Delta_(m) because log k <= log n and the gaps increase.
    Once the maximum over the prefix reaches that bound, no later entry can exceed it; otherwise the
    prefix doubles (quantile functions such as scipy's Beta ppf are slow, and for Weibull-class rows
    the supremum sits near the top).
    """
    m = min(n, max(_FIRST_PREFIX, 2 * K))
    while True:
        top = _top_entries(fam, n, m)  # (m,)
        best = accumulation_scale(top[None, :], K=K)[0]
        if m == n or best >= np.log(n) / (top[0] - top[-1]):
            return float(best)
        m = min(n, 2 * m)


def quantile_row_scale(family: Union[str, Family], n: Any, K: int = 16) -> Any:
    """:math:`\\tilde\\kappa_{n,K}`, the accumulation scale :math:`\\kappa_K` of the quantile row (``rem-05-quantile-row``).

    ``n`` is one length or a 1-D sequence of lengths (a float or an array back).  Heuristic (ours):
    the fitted growth exponent of the median :math:`\\kappa_{n,K}` of random rows follows the slope of
    :math:`\\log\\tilde\\kappa_{n,K}` over the same lengths, not that of :math:`\\log\\bar\\kappa_n`
    (chapter 05 tests this on its own runs).  Exact: only as many entries are evaluated as certify the
    supremum (:func:`quantile_row` gives the whole row).

    Test: ``tests/test_quantile_rows.py::test_quantile_row_scale_closed_forms`` (exponential rows give
    exactly 1, ``edge`` gives :math:`L(L - \\log K)` with :math:`L = \\log(n+1)`, uniform rows
    :math:`(n+1)\\log K/(K-1)`; reading :math:`\\kappa_K` at position ``K + 1`` instead of ``K``, or
    the leading-order :math:`(\\log n)^2` for ``edge``, fails) and
    ``test_quantile_row_scale_equals_the_whole_row`` (the certified prefix against the full row).
    """
    K = as_K(K)
    fam = get(family)
    lengths = np.atleast_1d(np.asarray(n))
    if lengths.ndim != 1 or lengths.size == 0:
        raise ValueError(f"n must be one length or a 1-D sequence of lengths, got shape {np.shape(n)}")
    out = np.array([_scale(fam, as_integer(m, f"{fam.name}: n", max(2, fam.min_n)), K) for m in lengths])
    return float(out[0]) if np.ndim(n) == 0 else out
