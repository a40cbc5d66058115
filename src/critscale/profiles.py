"""The Legendre (microcanonical) entropy profile of chapter 09, ``prop-09-legendre`` (Proposition 9 of theory.md §4.2).

The proposition (a heuristic, our reconstruction) says that below the critical scale the softmax of a
row is governed by one point of its gap-count: with :math:`\\sigma(t) = \\log N(t)` and :math:`t_\\beta`
the maximiser of :math:`\\sigma(t) - \\beta t`,

.. math::

    \\log Z \\approx \\Lambda(\\beta),\\qquad H(\\beta) \\approx \\sigma(t_\\beta),\\qquad
    \\langle\\Delta\\rangle_\\beta \\approx t_\\beta .

:func:`legendre_point` computes :math:`t_\\beta` and :math:`\\sigma(t_\\beta)` of every row,
:func:`entropy_profile_limit` the limit of :math:`H/\\log n` at :math:`\\beta = c\\,\\bar\\kappa_n` that the
proposition predicts for each family, and :func:`annealed_profile` the same two relations at finite ``n``
for a smooth count, with their Laplace corrections (the finite-size model of chapter 09).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Union

import numpy as np
from scipy import integrate, special

from . import _validate
from ._validate import as_beta, as_real, as_scores, row_blocks, scalar_or_array
from .families import Family, get
from .gaps import _rank_counts, _sorted_gaps

__all__ = ["LegendrePoint", "legendre_point", "entropy_profile_limit", "AnnealedProfile", "annealed_profile"]


class LegendrePoint(NamedTuple):
    """The maximiser of :math:`\\log N(t) - \\beta t` per row and beta, each ``(..., len(beta))``.

    Attributes
    ----------
    t_beta:
        the gap :math:`t_\\beta` at which :math:`\\log N(t) - \\beta t` is largest (the smallest such gap).
    log_count:
        :math:`\\sigma(t_\\beta) = \\log N(t_\\beta)`, the predicted entropy.
    """

    t_beta: Any
    log_count: Any


def legendre_point(scores: Any, beta: Any) -> LegendrePoint:
    """Where the Legendre transform is attained: :math:`t_\\beta` and :math:`\\log N(t_\\beta)` of each row.

    ``prop-09-legendre`` (chapter 09) predicts :math:`H(\\beta) \\approx \\log N(t_\\beta)` and
    :math:`\\langle\\Delta\\rangle_\\beta \\approx t_\\beta`; by construction
    :math:`\\Lambda(\\beta) = \\log N(t_\\beta) - \\beta t_\\beta` (:func:`critscale.legendre_transform`).
    The maximum is taken over the sorted gaps :math:`\\Delta_{(k)}` with :math:`\\log(k+1)` for
    :math:`\\log N` (0-based ``k``); inside a block of tied gaps the expression is largest at the block's
    last position, where :math:`k + 1 = N`, so ties are counted correctly.  Among equal maxima the
    smallest gap is returned.

    Parameters
    ----------
    scores:
        ``(..., n)`` scores; ``-inf`` entries are masked.
    beta:
        a scalar or 1-D array of finite values ``>= 0``.

    Returns
    -------
    :class:`LegendrePoint` with fields ``(..., len(beta))`` (``(...)`` for a scalar ``beta``).

    Test: ``tests/test_profiles.py::test_legendre_point_against_brute_force`` (brute force over the
    distinct gaps with exact counts, rows with ties and masks; a count of ``k`` instead of ``k + 1``,
    or the first instead of the last position of a tie block, gives a different point).
    """
    conv = as_scores(scores)
    betas, scalar = as_beta(beta)
    values, n, m = conv.values, conv.n, len(betas)
    rows = values.shape[0]
    t_beta = np.empty((rows, m))  # (rows, m)
    log_count = np.empty((rows, m))  # (rows, m)
    log_ranks = np.log(_rank_counts(n))  # (n,)
    for rs in row_blocks(rows, n, per_cell=4):
        gaps = _sorted_gaps(values[rs])  # (r, n)
        valid = np.isfinite(gaps)  # (r, n)
        log_counts = np.where(valid, log_ranks, -np.inf)  # (r, n)
        finite_gaps = np.where(valid, gaps, 0.0)  # (r, n)
        r = gaps.shape[0]
        beta_step = max(1, _validate.MAX_ELEMENTS // max(1, r * n))
        for b0 in range(0, m, beta_step):
            bs = slice(b0, min(m, b0 + beta_step))
            terms = log_counts[:, None, :] - betas[None, bs, None] * finite_gaps[:, None, :]  # (r, b, n)
            k = np.argmax(terms, axis=-1)  # (r, b)
            t_beta[rs, bs] = np.take_along_axis(finite_gaps, k, axis=-1)
            log_count[rs, bs] = log_ranks[k]
    if scalar:
        return LegendrePoint(conv.restore(t_beta[:, 0]), conv.restore(log_count[:, 0]))
    return LegendrePoint(conv.restore(t_beta, (m,)), conv.restore(log_count, (m,)))


def _tail_exponent(fam: Family) -> float:
    """The exponent ``e`` of the profile ``1 - c**e`` of a Gumbel-class family (``inf`` for ptail1)."""
    base = fam.name.rstrip("0123456789.")
    if fam.name == "gauss":
        return 2.0  # psi(x) = x^2/2 + O(log x): p = 2
    if base == "ptail":
        p = fam.params["p"]
        if p < 1:
            raise ValueError(f"{fam.name}: the Legendre profile needs a concave log-count, i.e. p >= 1, got p={p}")
        return np.inf if p == 1 else p / (p - 1.0)
    if fam.name == "logexp":
        return 1.0
    if fam.name.startswith("edge"):
        q = fam.params["q"]
        return q / (q + 1.0)
    raise ValueError(f"{fam.name}: no Legendre entropy profile is derived for this Gumbel-class family")


def entropy_profile_limit(family: Union[str, Family], c: Any) -> Any:
    """Limit of :math:`H/\\log n` at :math:`\\beta = c\\,\\bar\\kappa_n`, ``prop-09-legendre`` (chapter 09; Prop. 9, theory.md §4.2).

    The Legendre relation :math:`H \\approx \\sigma(t_\\beta)` with :math:`\\sigma_n(t) \\approx \\log n -
    \\psi(u_n - t)`, :math:`\\psi = -\\log\\bar F`, gives (a heuristic; for Gaussian rows the classical
    random-energy-model entropy :math:`\\log n - \\beta^2/2`):

    ==================================  ===========================================
    family                              :math:`\\lim H/\\log n`
    ==================================  ===========================================
    ``gauss`` (:math:`p = 2`)            :math:`(1 - c^2)_+`
    ``ptail<p>``, :math:`p > 1`          :math:`(1 - c^{p/(p-1)})_+`
    ``ptail1``                          1 for :math:`c < 1`, 0 for :math:`c \\ge 1`
    ``logexp``                          :math:`(1 - c)_+`
    ``edge`` (:math:`e^{-c_0u^{-q}}`)    :math:`(1 - c^{q/(q+1)})_+` (:math:`1-\\sqrt c` for ``q = 1``)
    planted, simplex, planted_shrink    1 for :math:`c < 1`, 0 for :math:`c \\ge 1`
    Weibull class (unif, sphere)        0 for :math:`c > 0` (the entropy stays bounded, Thm 7)
    ==================================  ===========================================

    Above :math:`c = 1` the Gumbel-class entropy converges to the finite Poisson–Dirichlet value
    (:func:`critscale.limits.pd_entropy`), so the profile is 0 there; every family gives 1 at ``c = 0``
    (the uniform softmax).  Heavy (Fréchet) tails have no profile here (``ValueError``).  Convergence in
    ``n`` is logarithmically slow (chapter 09).

    Parameters
    ----------
    family:
        a :class:`~critscale.families.Family` or a name accepted by :func:`critscale.families.get`.
    c:
        :math:`c = \\beta/\\bar\\kappa_n \\ge 0`, a scalar or an array.

    Returns
    -------
    The limit, a float or an array of the shape of ``c``.

    Test: ``tests/test_profiles.py::test_entropy_profile_limit`` (the closed forms for p = 2, 3, the
    exponential and the endpoint families, the REM entropy :math:`\\log n - \\beta^2/2` of Gaussian rows
    computed exactly at :math:`n = e^{400}` by mpmath; the neighbouring exponent :math:`c^{p-1}` or
    :math:`c^{(p-1)/p}` fails).
    """
    fam = get(family)
    c = as_real(c, "c", minimum=0)
    if fam.domain == "frechet":
        raise ValueError(f"{fam.name}: heavy (Frechet) tails have no Legendre entropy profile "
                         "(their accumulation scale is not the hazard scale, theory.md §4.1)")
    if fam.domain == "weibull":
        return scalar_or_array(np.where(c == 0, 1.0, 0.0))
    if fam.domain == "step":
        return scalar_or_array(np.where(c < 1, 1.0, 0.0))
    exponent = _tail_exponent(fam)
    if np.isinf(exponent):
        return scalar_or_array(np.where(c < 1, 1.0, 0.0))
    return scalar_or_array(np.maximum(1.0 - c**exponent, 0.0))


class AnnealedProfile(NamedTuple):
    """The annealed entropy and free-energy offset of :func:`annealed_profile`, each of the broadcast shape.

    Attributes
    ----------
    entropy:
        :math:`H_{\\rm ann} = \\log n + \\log M(\\beta) - \\beta M'(\\beta)/M(\\beta)` in nats, with
        :math:`M(\\beta) = \\mathbb E\\,e^{\\beta X}`.
    free_energy_offset:
        :math:`D = \\log M(\\beta) - \\sup_x[\\beta x + \\log\\bar F(x)]` in nats, the predicted
        :math:`\\log Z - \\Lambda(\\beta)`.
    """

    entropy: Any
    free_energy_offset: Any


def _gauss_moments(beta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log M, log M - beta E_beta X and sup_x [beta x + log Phibar(x)] for standard Gaussian scores."""
    log_m = beta**2 / 2
    # the supremum is attained where the hazard phi/Phibar equals beta; the hazard increases, exceeds x
    # everywhere and tends to 0 as x -> -inf, so bisection on log hazard - log beta over
    # [-sqrt(-2 log beta) - 5, beta + 1] converges (beta > 0)
    def log_hazard(x: np.ndarray) -> np.ndarray:
        return -x**2 / 2 - 0.5 * np.log(2 * np.pi) - special.log_ndtr(-x)

    positive = beta > 0
    b = np.where(positive, beta, 1.0)
    lo = -np.sqrt(2 * np.maximum(-np.log(b), 0.0)) - 5.0
    hi = b + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        below = log_hazard(mid) < np.log(b)
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    x = 0.5 * (lo + hi)
    sup = np.where(positive, b * x + special.log_ndtr(-x), 0.0)
    return log_m, log_m - beta**2, sup


def _ptail_moments(beta: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same for scores with survival exp(-x^p), x > 0 (p > 1), by quadrature around the mode.

    With g(x) = beta x - x^p + log(p x^(p-1)) (log density plus beta x) and x0 = (beta/p)^(1/(p-1)) the
    maximiser of beta x - x^p: log M = g(x0) + log I0 and log M - beta E X = g(x0) - beta x0 + log I0
    - beta I1/I0, where I_k = int (x - x0)^k e^{g(x) - g(x0)} dx, so no large terms cancel.
    """
    log_m, centred, sup = (np.empty_like(beta) for _ in range(3))
    for index, b in np.ndenumerate(beta):
        if b == 0:
            log_m[index], centred[index], sup[index] = 0.0, 0.0, 0.0  # M(0) = 1; sup at x -> 0 is log 1
            continue
        x0 = (b / p) ** (1.0 / (p - 1.0))
        width = 1.0 / np.sqrt(p * (p - 1.0) * x0 ** (p - 2.0))
        g0 = b * x0 - x0**p + np.log(p) + (p - 1.0) * np.log(x0)

        def weight(x: float) -> float:
            return np.exp(b * x - x**p + np.log(p) + (p - 1.0) * np.log(x) - g0) if x > 0 else 0.0

        top = x0 + 60.0 * width + 10.0
        i0 = integrate.quad(weight, 0.0, top, points=[x0], limit=500, epsabs=0.0, epsrel=1e-13)[0]
        # I1 is a small difference of two halves: ask for an absolute accuracy relative to I0 * width
        i1 = integrate.quad(lambda x: (x - x0) * weight(x), 0.0, top, points=[x0], limit=500,
                            epsabs=1e-13 * i0 * width, epsrel=1e-10)[0]
        log_m[index] = g0 + np.log(i0)
        centred[index] = g0 - b * x0 + np.log(i0) - b * i1 / i0
        sup[index] = b * x0 - x0**p
    return log_m, centred, sup


def _logexp_moments(beta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores log E: M(beta) = Gamma(1 + beta), E_beta X = digamma(1 + beta), sup = beta log beta - beta."""
    log_m = special.gammaln(1.0 + beta)
    sup = np.where(beta > 0, special.xlogy(beta, beta) - beta, 0.0)
    return log_m, log_m - beta * special.digamma(1.0 + beta), sup


def _edge_moments(beta: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores -c/E (survival exp(-c/u) at -u): M(beta) = 2 sqrt(c beta) K_1(z), z = 2 sqrt(c beta),
    E_beta X = -sqrt(c/beta) K_0(z)/K_1(z), sup_u [-beta u - c/u] = -z."""
    positive = beta > 0
    b = np.where(positive, beta, 1.0)
    z = 2.0 * np.sqrt(c * b)
    log_k1 = np.log(special.kve(1, z)) - z
    log_m = np.where(positive, np.log(z) + log_k1, 0.0)
    mean = -np.sqrt(c / b) * special.kve(0, z) / special.kve(1, z)
    return log_m, np.where(positive, log_m - b * mean, 0.0), np.where(positive, -z, 0.0)


def annealed_profile(family: Union[str, Family], n: Any, beta: Any) -> AnnealedProfile:
    """Finite-``n`` annealed entropy and free-energy offset of ``prop-09-legendre`` (chapter 09; Prop. 9, theory.md §4.2).

    For ``n`` i.i.d. scores :math:`X` with survival function :math:`\\bar F` the annealed approximation
    replaces :math:`\\sum_i e^{\\beta s_i}` by :math:`nM(\\beta)`, :math:`M(\\beta) = \\mathbb E\\,e^{\\beta X}`,
    and :math:`\\sum_i s_ie^{\\beta s_i}` by :math:`nM'(\\beta)`, and the gap count by the smooth count
    :math:`n\\bar F(x)` at level :math:`x`.  Then

    .. math::

        H_{\\rm ann} = \\log n + \\log M(\\beta) - \\beta\\frac{M'(\\beta)}{M(\\beta)},\\qquad
        D = \\log M(\\beta) - \\sup_x\\,[\\beta x + \\log\\bar F(x)]

    are the predicted entropy and the predicted :math:`\\log Z - \\Lambda(\\beta)` (the row's maximum
    cancels in the difference).  They are predictions below the critical scale only: far above it the
    annealed approximation fails (:math:`H_{\\rm ann}` can even be negative).  At :math:`\\beta = c\\,\\bar\\kappa_n`, :math:`0 < c < 1`, Laplace's method
    gives :math:`H_{\\rm ann} = \\ell(c)\\log n + a\\log\\log n + O(1)` with :math:`\\ell` the limit of
    :func:`entropy_profile_limit`, :math:`a = c^2/2` for Gaussian rows (where
    :math:`H_{\\rm ann} = \\log n - \\beta^2/2` exactly) and :math:`a = 1/2` for ``ptail<p>``, ``logexp`` and
    ``edge``; and :math:`D = \\log\\beta + \\tfrac12\\log(2\\pi/\\psi''(x_\\beta)) + o(1) =
    \\tfrac12\\log\\log n + O(1)`, the Laplace prefactor of the proposition's derivation.

    Supported families (closed forms, or quadrature around the mode): ``gauss``, ``ptail<p>`` with
    ``p > 1``, ``logexp`` and ``edge(c, q=1)``; any other family is a ``ValueError``.

    Parameters
    ----------
    family:
        a :class:`~critscale.families.Family` or a name accepted by :func:`critscale.families.get`.
    n:
        row lengths ``>= 1``, a scalar or an array.
    beta:
        inverse temperatures ``>= 0``, a scalar or an array broadcastable with ``n``.

    Returns
    -------
    :class:`AnnealedProfile` of floats or arrays of the broadcast shape.

    Test: ``tests/test_profiles.py::test_annealed_profile_against_quadrature`` (mpmath quadrature of the
    defining integrals for every supported family; the density :math:`e^{-\\psi}` without its factor
    :math:`\\psi'`, or the sign of the mean-score term, is off by more than 0.1 nats) and
    ``test_annealed_profile_expansions`` (the :math:`\\log\\log n` coefficients above at
    :math:`\\log n = 10^4 \\dots 10^8`; the coefficient 0 or 1 is off by more than 1 nat).
    """
    fam = get(family)
    n = as_real(n, "n", minimum=1)
    beta = as_real(beta, "beta", minimum=0)
    n, beta = np.broadcast_arrays(n, beta)
    beta = np.array(beta, dtype=np.float64)
    if fam.name == "gauss":
        log_m, centred, sup = _gauss_moments(beta)
    elif fam.name.startswith("ptail") and fam.params.get("p", 0) > 1:
        log_m, centred, sup = _ptail_moments(beta, fam.params["p"])
    elif fam.name == "logexp":
        log_m, centred, sup = _logexp_moments(beta)
    elif fam.name.startswith("edge") and fam.params.get("q") == 1:
        log_m, centred, sup = _edge_moments(beta, fam.params["c"])
    else:
        raise ValueError(f"{fam.name}: no annealed profile is implemented (gauss, ptail<p> with p > 1, "
                         "logexp and edge with q = 1 are)")
    entropy = np.log(n) + centred
    return AnnealedProfile(scalar_or_array(entropy), scalar_or_array(log_m - sup))
