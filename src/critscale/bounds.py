"""The deterministic bounds of chapters 02-04, one function per result (our reconstruction, theory.md §3.2).

Every statement holds for every row, whatever its law; the book proves each one and checks it on every
row of every family.  Labels are those of the book's ``prf`` directives.

==========================  =============================  ============================================
result (book label)         theory.md                      function
==========================  =============================  ============================================
``thm-02-sandwich``         Theorem 1 (§3.2)               :func:`free_energy_bounds`
``cor-02-width``            (book only)                    :func:`sandwich_width_bound`
``thm-03-collapse``         Theorem 2 (§3.2)               :func:`collapse_bounds`
``thm-03-spreading``        Theorem 3 (§3.2)               :func:`spreading_bounds`
``cor-03-dispersion``       Theorem 3, special case K = n  :func:`dispersion_bounds`
``cor-04-critical-scale``   Corollary 4 (§3.2)             :func:`critical_scale_bounds`
``cor-04-brackets``         Corollary 5 (§3.2)             :func:`beta_half_bracket`,
                                                           :func:`beta_entropy_bracket`
==========================  =============================  ============================================

``lem-02-lambda-zero`` (Lemma 1: :math:`\\Lambda(\\beta) \\ge (1-\\beta/\\kappa)\\log 2` below
:math:`\\kappa`) is the ``K = 2`` case of :func:`spreading_bounds` (field ``entropy``, which also bounds
:math:`\\Lambda` and :math:`\\log Z` from below).

Conventions.  Scales and inverse temperatures are broadcast against each other (any shapes numpy can
broadcast), so the bounds of many rows at many ``beta`` come from one call.  Where a statement does
not apply (``beta`` on the wrong side of its threshold) the returned bound is the trivial one
(``inf`` for an upper bound on a positive quantity, ``1`` for :math:`1 - p_{\\max}` or
:math:`p_{\\max}`, ``0`` for a lower bound) and says so in the field's description.  A tied maximum
has :math:`\\kappa = \\infty` (:func:`critscale.accumulation_scale`), so the supercritical bounds are
trivial for it, as they must be.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._validate import as_beta, as_K, as_number, as_real, as_scores, scalar_or_array
from .gaps import legendre_transform

__all__ = [
    "FreeEnergyBounds",
    "free_energy_bounds",
    "sandwich_width_bound",
    "CollapseBounds",
    "collapse_bounds",
    "SpreadingBounds",
    "spreading_bounds",
    "dispersion_bounds",
    "CriticalScaleBounds",
    "critical_scale_bounds",
    "Bracket",
    "beta_half_bracket",
    "beta_entropy_bracket",
    "COLLAPSE_ENTROPY_CONSTANT",
]

COLLAPSE_ENTROPY_CONSTANT = 4.0 / 3.0 + 8.0 / np.e
"""The constant :math:`\\frac43 + \\frac8e = 4.2764\\ldots < 4.28` of item 3 of ``thm-03-collapse``."""


def _broadcast(*arrays: np.ndarray) -> list[np.ndarray]:
    try:
        return np.broadcast_arrays(*arrays)
    except ValueError:
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(f"the scales and beta must broadcast against each other, got shapes {shapes}") from None


def _scale(value: Any, name: str) -> np.ndarray:
    """An accumulation scale: real, ``>= 0``, ``inf`` allowed (a tied maximum)."""
    return as_real(value, name, minimum=0, allow_inf=True)


def _beta(value: Any) -> np.ndarray:
    return as_real(value, "beta", minimum=0)


class FreeEnergyBounds(NamedTuple):
    """Both sides of ``thm-02-sandwich``: ``lower <= log Z(beta) <= upper``, each ``(..., len(beta))``."""

    lower: Any
    upper: Any


def free_energy_bounds(scores: Any, beta: Any, theta: float = 0.5) -> FreeEnergyBounds:
    """Free-energy sandwich, ``thm-02-sandwich`` (chapter 02; Theorem 1 of theory.md §3.2).

    .. math::

        \\Lambda(\\beta)\\ \\le\\ \\log Z(\\beta) = -\\log p_{\\max}(\\beta)\\ \\le\\
        \\Lambda(\\theta\\beta) + \\log\\frac{1}{1-\\theta},\\qquad 0 < \\theta < 1,

    with :math:`\\Lambda` the Legendre transform of :math:`\\log N` (:func:`critscale.legendre_transform`).
    The theorem's third statement, :math:`H(\\beta) \\ge \\log Z(\\beta)`, needs no function: the lower
    bound of the entropy is :math:`\\log Z` itself (:func:`critscale.softmax_stats`).

    Parameters
    ----------
    scores:
        ``(..., n)`` scores; ``-inf`` entries are masked.
    beta:
        a scalar or 1-D array of finite values ``>= 0``.
    theta:
        a number in ``(0, 1)``.

    Returns
    -------
    :class:`FreeEnergyBounds` with fields ``(..., len(beta))`` (``(...)`` for a scalar ``beta``).

    Test: ``tests/test_bounds.py::test_free_energy_bounds`` (holds on every family row and on an exact
    row where it is nearly tight; the slip :math:`\\Lambda(\\beta/\\theta)` for
    :math:`\\Lambda(\\theta\\beta)`, or :math:`\\log\\frac1\\theta` for :math:`\\log\\frac1{1-\\theta}`,
    fails there).
    """
    theta = as_number(theta, "theta", minimum=0, strict=True)
    if not theta < 1:
        raise ValueError(f"theta must be in (0, 1), got {theta}")
    betas = _beta(beta)
    lower = legendre_transform(scores, betas)
    upper = legendre_transform(scores, theta * betas) + np.log(1.0 / (1.0 - theta))
    return FreeEnergyBounds(lower=lower, upper=upper)


def sandwich_width_bound(n: Any, theta: Any, lam: Any = 0.0) -> Any:
    """Width of the free-energy sandwich, ``cor-02-width`` (chapter 02; a corollary of ``thm-02-sandwich``).

    For every row of ``n`` entries, every :math:`\\beta \\ge 0` and :math:`0 < \\theta < 1`,

    .. math::

        \\Bigl[\\Lambda(\\theta\\beta) + \\log\\frac{1}{1-\\theta}\\Bigr] - \\Lambda(\\beta)
        \\ \\le\\ (1-\\theta)\\bigl(\\log n - \\Lambda(\\beta)\\bigr) + \\log\\frac{1}{1-\\theta}
        \\ \\le\\ (1-\\theta)\\log n + \\log\\frac{1}{1-\\theta},

    by convexity of :math:`\\Lambda` and :math:`\\Lambda(0) = \\log n`.  The first bound is attained by the
    row with one maximum and ``n - 1`` entries at a common gap ``g``, at :math:`\\beta = \\log n/g`: at fixed
    :math:`\\theta` the sandwich does not pin :math:`\\log Z` to :math:`O(1)` uniformly in ``n``.  With
    :math:`\\theta = 1 - 1/\\log n`, the minimiser of the last bound, the width is at most
    :math:`1 + \\log\\log n`.

    Parameters
    ----------
    n:
        the number of entries of each row (``>= 2``), a scalar or an array.
    theta:
        numbers in ``(0, 1)``.
    lam:
        :math:`\\Lambda(\\beta)` of the row (:func:`critscale.legendre_transform`), ``0 <= lam <= log n``;
        the default 0 gives the row-independent bound.  All three broadcast together.

    Returns
    -------
    The bound in nats, a float or an array of the broadcast shape.

    Test: ``tests/test_bounds.py::test_sandwich_width_bound`` (holds on every family row at many
    :math:`\\beta` and :math:`\\theta`; equals the width of the step row at :math:`\\beta = \\log n/g`, so
    the slips :math:`(1-\\theta)^2\\log n`, :math:`\\theta(1-\\theta)\\log n` or a bound without the
    :math:`\\log n` term fail, and :math:`\\theta = 1 - 1/\\log n` gives exactly :math:`1 + \\log\\log n`).
    """
    n = as_real(n, "n", minimum=2)
    theta = as_real(theta, "theta", minimum=0, strict=True)
    if not np.all(theta < 1):
        raise ValueError(f"theta must be in (0, 1), got {theta}")
    lam = as_real(lam, "lam", minimum=0)
    n, theta, lam = _broadcast(n, theta, lam)
    return scalar_or_array((1.0 - theta) * (np.log(n) - lam) + np.log(1.0 / (1.0 - theta)))


class CollapseBounds(NamedTuple):
    """The bounds of ``thm-03-collapse`` at each (kappa, beta); trivial values where an item does not apply.

    Attributes
    ----------
    z_minus_one:
        item 1, :math:`Z - 1 \\le \\kappa/(\\beta - \\kappa)` for :math:`\\beta > \\kappa` (else ``inf``).
    outside:
        item 1, :math:`1 - p_{\\max} \\le \\kappa/\\beta` for :math:`\\beta > \\kappa` (else 1).
    entropy:
        item 2, :math:`H \\le \\kappa/(\\beta-\\kappa) + \\frac4e\\,\\kappa/(\\beta - 2\\kappa)` for
        :math:`\\beta > 2\\kappa` (else ``inf``).
    entropy_simple:
        item 3, :math:`H \\le (\\frac43 + \\frac8e)\\,\\kappa/\\beta < 4.28\\,\\kappa/\\beta` for
        :math:`\\beta \\ge 4\\kappa` (else ``inf``).
    """

    z_minus_one: Any
    outside: Any
    entropy: Any
    entropy_simple: Any


def collapse_bounds(kappa: Any, beta: Any) -> CollapseBounds:
    """Supercritical collapse, ``thm-03-collapse`` (chapter 03; Theorem 2 of theory.md §3.2).

    For a row with a unique maximum and accumulation scale :math:`\\kappa`:

    1. :math:`\\beta > \\kappa`: :math:`Z(\\beta) - 1 \\le \\kappa/(\\beta-\\kappa)` and
       :math:`1 - p_{\\max}(\\beta) \\le \\kappa/\\beta`;
    2. :math:`\\beta > 2\\kappa`: :math:`H(\\beta) \\le \\kappa/(\\beta-\\kappa) + \\frac4e\\,\\kappa/(\\beta-2\\kappa)`;
    3. :math:`\\beta \\ge 4\\kappa`: :math:`H(\\beta) \\le (\\frac43 + \\frac8e)\\,\\kappa/\\beta < 4.28\\,\\kappa/\\beta`.

    Parameters
    ----------
    kappa:
        accumulation scales :math:`\\kappa \\ge 0` (``inf`` for a tied maximum gives trivial bounds).
    beta:
        inverse temperatures ``>= 0``, broadcastable against ``kappa``.

    Returns
    -------
    :class:`CollapseBounds`, each field of the broadcast shape (a float for scalars).

    Test: ``tests/test_bounds.py::test_collapse_bounds`` (holds on every family row; on the row with
    gaps :math:`\\log k`, whose :math:`N(t) = \\lfloor e^t\\rfloor` nearly attains item 1, the slips
    :math:`\\kappa/\\beta` for :math:`\\kappa/(\\beta-\\kappa)`, :math:`\\kappa/(2\\beta)` for
    :math:`\\kappa/\\beta` and item 2 without its second term all fail).
    """
    kappa, beta = _broadcast(_scale(kappa, "kappa"), _beta(beta))
    with np.errstate(divide="ignore", invalid="ignore"):
        above = beta > kappa
        z_minus_one = np.where(above, kappa / (beta - kappa), np.inf)
        outside = np.where(above, kappa / beta, 1.0)
        entropy = np.where(beta > 2.0 * kappa,
                           kappa / (beta - kappa) + (4.0 / np.e) * kappa / (beta - 2.0 * kappa), np.inf)
        entropy_simple = np.where(beta >= 4.0 * kappa, COLLAPSE_ENTROPY_CONSTANT * kappa / beta, np.inf)
    return CollapseBounds(*(scalar_or_array(a) for a in (z_minus_one, outside, entropy, entropy_simple)))


class SpreadingBounds(NamedTuple):
    """The bounds of ``thm-03-spreading`` at each (kappa_K, beta).

    Attributes
    ----------
    max_weight:
        :math:`p_{\\max} \\le e^{-\\Lambda(\\beta)} \\le K^{-(1 - \\beta/\\kappa_K)}`.
    entropy:
        :math:`H \\ge \\log Z \\ge \\Lambda(\\beta) \\ge (1 - \\beta/\\kappa_K)\\log K`.

    For :math:`\\beta \\ge \\kappa_K` the values are trivially true (``max_weight >= 1``,
    ``entropy <= 0``); a row shorter than ``K`` (:math:`\\kappa_K = 0`) gets ``inf`` and ``-inf``.
    """

    max_weight: Any
    entropy: Any


def _spreading(ratio: np.ndarray, K: Any) -> SpreadingBounds:
    """``K^{-(1 - x)}`` and ``(1 - x) log K`` at ``x = beta/kappa_K``."""
    return SpreadingBounds(max_weight=np.power(np.asarray(K, dtype=np.float64), -(1.0 - ratio)),
                           entropy=(1.0 - ratio) * np.log(K))


def spreading_bounds(kappa_K: Any, beta: Any, K: int) -> SpreadingBounds:
    """Subcritical spreading, ``thm-03-spreading`` (chapter 03; Theorem 3 of theory.md §3.2).

    For every :math:`K \\ge 2` and :math:`0 \\le \\beta < \\kappa_K`,

    .. math::

        p_{\\max}(\\beta) \\le e^{-\\Lambda(\\beta)} \\le K^{-(1-\\beta/\\kappa_K)},\\qquad
        H(\\beta) \\ge \\log Z(\\beta) \\ge \\Lambda(\\beta) \\ge \\Bigl(1 - \\frac{\\beta}{\\kappa_K}\\Bigr)\\log K .

    With ``K = 2`` and a unique maximum (:math:`\\kappa_2 = \\kappa`) the last inequality is the
    quantitative part of ``lem-02-lambda-zero``.  The middle bound :math:`e^{-\\Lambda(\\beta)}` needs
    the row: :func:`critscale.legendre_transform`.

    Parameters
    ----------
    kappa_K:
        :math:`\\kappa_K \\ge 0` of each row (:func:`critscale.accumulation_scale` with the same ``K``;
        ``inf`` for a maximum of multiplicity ``>= K``, ``0`` for a row shorter than ``K``).
    beta:
        inverse temperatures ``>= 0``, broadcastable against ``kappa_K``.
    K:
        the integer ``K >= 2`` of :math:`\\kappa_K`.

    Returns
    -------
    :class:`SpreadingBounds`, each field of the broadcast shape (a float for scalars).

    Test: ``tests/test_bounds.py::test_spreading_bounds`` (holds on every family row; on the exact
    row with ``K - 1`` competitors tied at one gap it is nearly attained, and the slips
    :math:`K^{-(1+\\beta/\\kappa_K)}` or :math:`(1-\\beta/\\kappa_K)\\log K` with :math:`\\log(K+1)`
    fail there).
    """
    K = as_K(K)
    kappa_K, beta = _broadcast(_scale(kappa_K, "kappa_K"), _beta(beta))
    with np.errstate(divide="ignore"):
        ratio = np.where(kappa_K > 0, beta / np.where(kappa_K > 0, kappa_K, 1.0), np.inf)
    bounds = _spreading(ratio, K)
    return SpreadingBounds(*(scalar_or_array(a) for a in bounds))


def dispersion_bounds(scores: Any, beta: Any) -> SpreadingBounds:
    """Dispersion with bounded logits, ``cor-03-dispersion`` (chapter 03; Theorem 3 with ``K = n``).

    With :math:`n` valid entries and range :math:`R = \\Delta_{(n)}`, :math:`\\kappa_n = \\log n/R` and,
    for :math:`\\beta R < \\log n`,

    .. math::

        p_{\\max} \\le n^{-(1 - \\beta R/\\log n)},\\qquad H \\ge \\log n - \\beta R .

    This is the dispersion theorem of Veličković et al. (2024) in the book's notation.  A row with a
    single valid entry gets the trivial bounds 1 and 0; a row of ``n >= 2`` tied entries
    (:math:`R = 0`) gets the exact values :math:`1/n` and :math:`\\log n`.

    Parameters
    ----------
    scores:
        ``(..., n)`` scores; ``-inf`` entries are masked (``n`` counts the valid ones).
    beta:
        a scalar or 1-D array of finite values ``>= 0``.

    Returns
    -------
    :class:`SpreadingBounds` with fields ``(..., len(beta))`` (``(...)`` for a scalar ``beta``).

    Test: ``tests/test_bounds.py::test_dispersion_bounds`` (equals :func:`spreading_bounds` with
    :math:`K = n` and :math:`\\kappa_n` from :func:`critscale.accumulation_scale`, and is attained by a
    row with one top and ``n - 1`` tied entries at ``beta = 0``; a range measured from the mean
    instead of the minimum fails it).
    """
    conv = as_scores(scores)
    betas, scalar = as_beta(beta)
    valid = np.isfinite(conv.values)  # (rows, n)
    count = valid.sum(axis=-1).astype(np.float64)  # (rows,)
    value_range = conv.values.max(axis=-1) - np.where(valid, conv.values, np.inf).min(axis=-1)  # (rows,)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = betas[None, :] * value_range[:, None] / np.log(count)[:, None]  # (rows, m) = beta/kappa_n
    ratio = np.where(value_range[:, None] == 0, 0.0, ratio)  # n tied entries: kappa_n = inf
    bounds = _spreading(ratio, count[:, None])
    single = (count == 1)[:, None]  # (rows, 1): nothing to bound
    fields = (np.where(single, 1.0, bounds.max_weight), np.where(single, 0.0, bounds.entropy))
    if scalar:
        return SpreadingBounds(*(conv.restore(f[:, 0]) for f in fields))
    return SpreadingBounds(*(conv.restore(f, (len(betas),)) for f in fields))


class CriticalScaleBounds(NamedTuple):
    """The two regimes of ``cor-04-critical-scale`` at each (kappa, kappa_K, beta).

    Attributes
    ----------
    max_weight_low, entropy_high:
        item 1 (:math:`\\beta \\ge 4\\kappa`): :math:`p_{\\max} \\ge 1 - \\kappa/\\beta` and
        :math:`H \\le 4.28\\,\\kappa/\\beta`; elsewhere 0 and ``inf``.
    max_weight_high, entropy_low:
        item 2 (:math:`\\beta \\le \\kappa_K/2`): :math:`p_{\\max} \\le K^{-1/2}` and
        :math:`H \\ge \\frac12\\log K`; elsewhere 1 and 0.
    """

    max_weight_low: Any
    entropy_high: Any
    max_weight_high: Any
    entropy_low: Any


def critical_scale_bounds(kappa: Any, kappa_K: Any, K: int, beta: Any) -> CriticalScaleBounds:
    """Critical scale, ``cor-04-critical-scale`` (chapter 04; Corollary 4 of theory.md §3.2), for one row.

    The corollary is a statement about sequences of rows: :math:`\\beta_n/\\kappa_n \\to \\infty` forces
    :math:`H_n \\to 0`, :math:`p_{\\max} \\to 1`; for regularly accumulating rows
    (:math:`\\kappa_{n,K_n} \\ge c\\,\\kappa_n`, :math:`K_n \\to \\infty`), :math:`\\beta_n \\le \\frac c2\\kappa_n`
    forces :math:`p_{\\max} \\le K_n^{-1/2} \\to 0` and :math:`H_n \\ge \\frac12\\log K_n \\to \\infty`.
    Its proof rests on two finite-row bounds, returned here:

    1. if :math:`\\beta \\ge 4\\kappa`: :math:`1 - p_{\\max} \\le \\kappa/\\beta` and :math:`H \\le 4.28\\,\\kappa/\\beta`;
    2. if :math:`\\beta \\le \\kappa_K/2` (implied by :math:`\\beta \\le \\frac c2\\kappa` when
       :math:`\\kappa_K \\ge c\\kappa`): :math:`p_{\\max} \\le K^{-1/2}` and :math:`H \\ge \\frac12\\log K`.

    Parameters
    ----------
    kappa, kappa_K:
        :math:`\\kappa` and :math:`\\kappa_K` of each row (``>= 0``, ``inf`` allowed).
    K:
        the integer ``K >= 2`` of ``kappa_K``.
    beta:
        inverse temperatures ``>= 0``; all three arrays broadcast together.

    Test: ``tests/test_bounds.py::test_critical_scale_bounds`` (holds on every family row; the exact row
    with ``K - 1`` tied competitors has :math:`p_{\\max} \\approx K^{-1/2}` at :math:`\\beta = \\kappa_K/2`,
    so the slip :math:`K^{-1}` fails, and so does the threshold :math:`\\beta \\ge \\kappa` for item 1).
    """
    K = as_K(K)
    kappa, kappa_K, beta = _broadcast(_scale(kappa, "kappa"), _scale(kappa_K, "kappa_K"), _beta(beta))
    with np.errstate(divide="ignore", invalid="ignore"):
        collapsed = (beta >= 4.0 * kappa) & (beta > 0)
        max_weight_low = np.where(collapsed, 1.0 - kappa / beta, 0.0)
        entropy_high = np.where(collapsed, 4.28 * kappa / beta, np.inf)
    spread = (beta <= kappa_K / 2.0) & (kappa_K > 0)  # kappa_K = 0: fewer than K entries, no statement
    max_weight_high = np.where(spread, float(K) ** -0.5, 1.0)
    entropy_low = np.where(spread, 0.5 * np.log(K), 0.0)
    return CriticalScaleBounds(*(scalar_or_array(a) for a in
                                 (max_weight_low, entropy_high, max_weight_high, entropy_low)))


def _scaled(kappa_K: np.ndarray, factor: Any) -> np.ndarray:
    """``kappa_K * factor``, with 0 where the factor is 0 (also for an infinite ``kappa_K``)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.asarray(factor) == 0, 0.0, kappa_K * factor)


class Bracket(NamedTuple):
    """``lower <= root <= upper`` for an operational critical temperature (``cor-04-brackets``)."""

    lower: Any
    upper: Any


def beta_half_bracket(kappa: Any, kappa_K: Any, K: int) -> Bracket:
    """Bracket of :math:`\\beta_{1/2}` (``p_max = 1/2``), ``cor-04-brackets`` item 1 (Corollary 5, theory.md §3.2).

    .. math::

        \\kappa_K\\Bigl(1 - \\frac{\\log 2}{\\log K}\\Bigr) \\le \\beta_{1/2} \\le 2\\kappa

    for every row with a unique maximum and every :math:`K \\ge 2` (the lower end is 0 for ``K = 2``
    and :math:`\\frac34\\kappa_{16}` for ``K = 16``).  The root itself is
    :func:`critscale.beta_at_max_weight`.

    Test: ``tests/test_bounds.py::test_beta_half_bracket`` (contains the root on every family row; on
    the row with gaps :math:`\\log k`, :math:`\\beta_{1/2} \\approx 1.73\\,\\kappa`, so the slip
    :math:`\\kappa` for :math:`2\\kappa` fails, and on the tied-competitor row the slip
    :math:`2\\kappa_K(1-\\log2/\\log K)` fails).
    """
    K = as_K(K)
    kappa, kappa_K = _broadcast(_scale(kappa, "kappa"), _scale(kappa_K, "kappa_K"))
    lower = _scaled(kappa_K, 1.0 - np.log(2.0) / np.log(K))
    return Bracket(lower=scalar_or_array(lower), upper=scalar_or_array(2.0 * kappa))


def beta_entropy_bracket(kappa: Any, kappa_K: Any, K: int, h: Any) -> Bracket:
    """Bracket of :math:`\\beta(H_0)` (entropy ``H_0`` nats), ``cor-04-brackets`` item 2 (Corollary 5, theory.md §3.2).

    .. math::

        \\kappa_K\\Bigl(1 - \\frac{H_0}{\\log K}\\Bigr) \\le \\beta(H_0) \\le \\max\\Bigl(4, \\frac{4.28}{H_0}\\Bigr)\\kappa

    for every row with a unique maximum, :math:`K \\ge 2` and :math:`0 < H_0`; the lower end is
    informative for :math:`H_0 < \\log K` (otherwise it is :math:`\\le 0`, the trivial bound).  The root
    itself is :func:`critscale.beta_at_entropy`.

    Parameters
    ----------
    kappa, kappa_K:
        :math:`\\kappa` and :math:`\\kappa_K` of each row.
    K:
        the integer ``K >= 2`` of ``kappa_K``.
    h:
        target entropies :math:`H_0 > 0` in nats; broadcast with the scales.

    Test: ``tests/test_bounds.py::test_beta_entropy_bracket`` (contains the root on every family row; on
    the row with gaps :math:`\\log k` at :math:`H_0 = 0.05`, :math:`\\beta(H_0) \\approx 7.5\\,\\kappa`, so
    the slip :math:`\\max(4, 4.28\\,H_0)` fails).
    """
    K = as_K(K)
    kappa, kappa_K, h = _broadcast(_scale(kappa, "kappa"), _scale(kappa_K, "kappa_K"),
                                   as_real(h, "h", minimum=0, strict=True))
    lower = _scaled(kappa_K, 1.0 - h / np.log(K))
    upper = np.maximum(4.0, 4.28 / h) * kappa
    return Bracket(lower=scalar_or_array(lower), upper=scalar_or_array(upper))
