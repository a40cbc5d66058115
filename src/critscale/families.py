"""Random score families: samplers and their deterministic accumulation scales (theory.md §4.1).

Each family is one row model.  For i.i.d. scores with survival function :math:`\\bar F` the scale is the
hazard at the :math:`1/n`-quantile,

.. math::

    \\bar\\kappa_n = n f(u_n) = f(u_n)/\\bar F(u_n),\\qquad u_n = \\bar F^{-1}(1/n)

(theory.md §4, also the inverse Gumbel normalising constant).  For the planted families it is the
exact :math:`\\log n / g`.  ``kappa_bar`` is exact (closed form or scipy's exact quantile and
density); ``law`` is the leading-order law of the §4.1 table.

The families, by the names :func:`get` accepts (each constructor's docstring gives its row, its exact
:math:`\\bar\\kappa_n` and the derivation): ``gauss``, ``ptail<p>``, ``logexp`` and ``edge`` (Gumbel class),
``unif`` and ``sphere<d>`` (Weibull class), ``planted``, ``simplex`` and ``planted_shrink`` (step), ``pareto<a>``
(Fréchet class).  ``hazard_nondecreasing`` records, for the Gumbel-class families, whether the hazard
:math:`f/\\bar F` is eventually nondecreasing (:math:`-\\log\\bar F` eventually convex): the sufficient condition
for the bulk bound under which chapter 06 states Theorem 6 (``thm-06-gumbel``) items 2 and 4.

Every sampler is vectorised over rows and takes a ``numpy.random.Generator``; the planted entry is
column 0 (positions never matter to the statistics).  :func:`family_rows` draws the seeded rows of the
book's convention, ``default_rng([seed, family index, n])`` (theory.md §5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
from scipy import special, stats

from ._validate import as_integer, as_number, as_real, as_seed, scalar_or_array

__all__ = [
    "Family",
    "STANDARD",
    "get",
    "names",
    "family_rows",
    "gauss",
    "ptail",
    "logexp",
    "edge",
    "unif",
    "sphere",
    "planted",
    "simplex",
    "planted_shrink",
    "pareto",
]


def _lengths(n: Any, minimum: int = 1) -> np.ndarray:
    """Row lengths as a float64 array: real, finite and ``>= minimum`` (not necessarily integers)."""
    return as_real(n, "n", minimum=minimum)


@dataclass(frozen=True)
class Family:
    """A random score family (theory.md §4.1).

    Attributes
    ----------
    name:
        registry name, e.g. ``"gauss"``, ``"sphere5"``.
    domain:
        extreme-value class: ``"gumbel"``, ``"weibull"``, ``"step"`` (planted) or ``"frechet"``.
    law_label:
        LaTeX of the leading-order law, e.g. ``r"\\sqrt{2\\log n}"``.
    params:
        the family's parameters (e.g. ``{"d": 5}``).
    iid:
        ``True`` when the row is i.i.d. from a law with survival function :meth:`sf`.
    hazard_nondecreasing:
        Gumbel families only (``None`` otherwise): whether the hazard :math:`f/\\bar F` is eventually
        nondecreasing, i.e. :math:`-\\log\\bar F` eventually convex, the hypothesis of chapter 06's
        Theorem 6 (``thm-06-gumbel``) for its items 2 and 4.
    weibull_alpha:
        the endpoint exponent :math:`\\alpha` (Weibull families only), the ``alpha`` of
        :func:`critscale.limits.weibull_gaps`.
    sampler, kappa_bar_formula, law_formula, survival, upper_quantile:
        the formulas behind :meth:`sample`, :meth:`kappa_bar`, :meth:`law`, :meth:`sf` and
        :meth:`quantile` (``survival`` and ``upper_quantile`` are ``None`` for non-i.i.d. rows); call the
        methods, which validate their arguments.
    min_n:
        the smallest row length the family is defined for.
    """

    name: str
    domain: str
    law_label: str
    sampler: Callable[[np.random.Generator, int, int], np.ndarray] = field(repr=False)
    kappa_bar_formula: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    law_formula: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    survival: Optional[Callable[[np.ndarray], np.ndarray]] = field(default=None, repr=False)
    upper_quantile: Optional[Callable[[np.ndarray], np.ndarray]] = field(default=None, repr=False)
    params: dict = field(default_factory=dict)
    weibull_alpha: Optional[float] = None
    min_n: int = 1
    hazard_nondecreasing: Optional[bool] = None

    @property
    def iid(self) -> bool:
        return self.survival is not None

    def sample(self, n: int, rows: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``rows`` independent rows of length ``n``: a ``(rows, n)`` float64 array."""
        n = as_integer(n, f"{self.name}: n", self.min_n)
        rows = as_integer(rows, f"{self.name}: rows", 0)
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"{self.name}: rng must be a numpy.random.Generator, got {type(rng).__name__}")
        return np.asarray(self.sampler(rng, n, rows), dtype=np.float64)  # (rows, n)

    def kappa_bar(self, n: Any) -> Any:
        """Exact deterministic accumulation scale :math:`\\bar\\kappa_n` (theory.md §4, §4.1)."""
        return scalar_or_array(self.kappa_bar_formula(_lengths(n, self.min_n)))

    def law(self, n: Any) -> Any:
        """Leading-order law of :math:`\\bar\\kappa_n` (the §4.1 table), e.g. :math:`\\sqrt{2\\log n}`."""
        return scalar_or_array(self.law_formula(_lengths(n)))

    def sf(self, x: Any) -> Any:
        """Survival function :math:`\\bar F(x) = P(s > x)` of one score (i.i.d. families only)."""
        if self.survival is None:
            raise ValueError(f"{self.name} is not an i.i.d. family: it has no single-score survival function")
        return scalar_or_array(self.survival(as_real(x, "x", allow_inf=True)))

    def quantile(self, n: Any) -> Any:
        """The :math:`1/n`-upper quantile :math:`u_n = \\bar F^{-1}(1/n)` (i.i.d. families only)."""
        if self.upper_quantile is None:
            raise ValueError(f"{self.name} is not an i.i.d. family: it has no quantile u_n")
        return scalar_or_array(self.upper_quantile(_lengths(n)))


def _fraction_label(frac: Fraction) -> str:
    return str(frac.numerator) if frac.denominator == 1 else f"{frac.numerator}/{frac.denominator}"


def _number(x: float) -> str:
    return f"{x:g}"


def gauss() -> Family:
    """Standard Gaussian scores; :math:`\\bar\\kappa_n = n\\varphi(u_n) \\sim \\sqrt{2\\log n}` (REM; theory.md §4.1)."""
    norm = stats.norm()
    return Family(
        name="gauss", domain="gumbel", law_label=r"\sqrt{2\log n}",
        sampler=lambda rng, n, rows: rng.standard_normal((rows, n)),
        kappa_bar_formula=lambda n: n * norm.pdf(norm.isf(1.0 / n)),
        law_formula=lambda n: np.sqrt(2.0 * np.log(n)),
        survival=norm.sf, upper_quantile=lambda n: norm.isf(1.0 / n),
        hazard_nondecreasing=True,  # Mills' ratio: the Gaussian hazard increases
    )


def ptail(p: float) -> Family:
    """Scores :math:`E^{1/p}` with :math:`\\bar F(x)=e^{-x^p}`; :math:`\\bar\\kappa_n = p(\\log n)^{1-1/p}` (theory.md §4.1).

    :math:`u_n = (\\log n)^{1/p}` and the hazard is :math:`f/\\bar F = p x^{p-1}`, nondecreasing for :math:`p \\ge 1`
    only; ``ptail0.5`` is the stretched tail of chapter 06, outside the hypothesis of Theorem 6.
    """
    p = as_number(p, "ptail: p", minimum=0, strict=True)
    exponent = 1 - 1 / Fraction(p).limit_denominator(1000)
    if p == 1:
        label = "1"
    else:
        label = rf"{_number(p)}(\log n)^{{{_fraction_label(exponent)}}}"
    return Family(
        name=f"ptail{_number(p)}", domain="gumbel", law_label=label,
        sampler=lambda rng, n, rows: rng.standard_exponential((rows, n)) ** (1.0 / p),
        kappa_bar_formula=lambda n: p * np.log(n) ** (1.0 - 1.0 / p) if p != 1 else np.ones_like(n),
        law_formula=lambda n: p * np.log(n) ** (1.0 - 1.0 / p) if p != 1 else np.ones_like(n),
        survival=lambda x: np.where(x > 0, np.exp(-np.maximum(x, 0.0) ** p), 1.0),
        upper_quantile=lambda n: np.log(n) ** (1.0 / p),
        params={"p": p},
        hazard_nondecreasing=bool(p >= 1),  # hazard p x^(p-1)
    )


def logexp() -> Family:
    """Scores :math:`\\log E`, :math:`\\bar F(x) = e^{-e^x}`; :math:`\\bar\\kappa_n = \\log n` (theory.md §4.1), since
    :math:`u_n = \\log\\log n` and the hazard is :math:`f/\\bar F = e^x`."""
    return Family(
        name="logexp", domain="gumbel", law_label=r"\log n",
        sampler=lambda rng, n, rows: np.log(rng.standard_exponential((rows, n))),
        kappa_bar_formula=lambda n: np.log(n),
        law_formula=lambda n: np.log(n),
        survival=lambda x: np.exp(-np.exp(x)),
        upper_quantile=lambda n: np.log(np.log(n)),
        hazard_nondecreasing=True,  # hazard e^x
    )


def edge(c: float = 1.0, q: float = 1.0) -> Family:
    """Endpoint singularity :math:`\\bar F(-u) = e^{-c u^{-q}}` at the endpoint 0 (theory.md §4.1).

    Scores :math:`s = -(c/E)^{1/q}`, which have :math:`P(s > -u) = P(E > c u^{-q}) = e^{-c u^{-q}}`, so
    :math:`u_n = (c/\\log n)^{1/q}` and
    :math:`\\bar\\kappa_n = n f(-u_n) = c q u_n^{-q-1} = q c^{-1/q}(\\log n)^{1+1/q}`, i.e. :math:`(\\log n)^2` for the
    default ``c = q = 1``.
    """
    c = as_number(c, "edge: c", minimum=0, strict=True)
    q = as_number(q, "edge: q", minimum=0, strict=True)
    scale = lambda n: q * c ** (-1.0 / q) * np.log(n) ** (1.0 + 1.0 / q)  # noqa: E731
    if c == 1 and q == 1:
        name, label = "edge", r"(\log n)^2"
    else:
        power = _fraction_label(1 + 1 / Fraction(q).limit_denominator(1000))
        name, label = f"edge_c{_number(c)}_q{_number(q)}", rf"(\log n)^{{{power}}}"

    def sf(x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", over="ignore"):
            inner = np.exp(-c * np.power(np.abs(np.minimum(x, 0.0)), -q))
        return np.where(x >= 0, 0.0, inner)

    return Family(
        name=name, domain="gumbel", law_label=label,
        sampler=lambda rng, n, rows: -(c / rng.standard_exponential((rows, n))) ** (1.0 / q),
        kappa_bar_formula=scale, law_formula=scale,
        survival=sf, upper_quantile=lambda n: -(c / np.log(n)) ** (1.0 / q),
        params={"c": c, "q": q},
        hazard_nondecreasing=True,  # hazard c q u^(-q-1) at -u, increasing towards the endpoint
    )


def unif() -> Family:
    """Uniform scores on (0, 1): Weibull class with :math:`\\alpha = 1`; :math:`\\bar\\kappa_n = n` (theory.md §4.1)."""
    return Family(
        name="unif", domain="weibull", law_label="n",
        sampler=lambda rng, n, rows: rng.random((rows, n)),
        kappa_bar_formula=lambda n: np.asarray(n, dtype=np.float64) * 1.0,
        law_formula=lambda n: np.asarray(n, dtype=np.float64) * 1.0,
        survival=lambda x: np.clip(1.0 - x, 0.0, 1.0),
        upper_quantile=lambda n: 1.0 - 1.0 / n,
        weibull_alpha=1.0,
    )


def sphere(d: int) -> Family:
    """Scores :math:`\\langle q, k\\rangle` of a fixed unit query and keys uniform on :math:`S^{d-1}` (theory.md §4.1).

    The score is :math:`2B - 1` with :math:`B \\sim \\mathrm{Beta}(a, a)`, :math:`a = (d-1)/2`: Weibull class
    with :math:`\\alpha = a`; :math:`\\bar\\kappa_n = n f(u_n)` exactly, :math:`\\asymp n^{2/(d-1)}`
    (Bruno et al.'s polynomial law).  Near the endpoint :math:`\\bar F(1-u) \\sim C u^a` with
    :math:`C = 2^{-a}/(a B(a,a))`, so ``law`` is :math:`a (Cn)^{1/a}`; ``kappa_bar`` uses the symmetry of the Beta
    law to evaluate :math:`u_n` through ``ppf(1/n)`` (no cancellation near the endpoint).
    """
    d = as_integer(d, "sphere: d", 2)
    a = (d - 1) / 2.0
    beta_law = stats.beta(a, a)
    endpoint_constant = 2.0 ** (-a) / (a * special.beta(a, a))  # Fbar(1 - u) ~ C u^a

    def kappa_bar(n: np.ndarray) -> np.ndarray:
        # u_n = 2 isf(1/n) - 1; by symmetry isf(1/n) = 1 - ppf(1/n) and pdf(1 - y) = pdf(y)
        return n * beta_law.pdf(beta_law.ppf(1.0 / n)) / 2.0

    exponent = Fraction(2, d - 1)
    label = "n" if exponent == 1 else rf"n^{{{_fraction_label(exponent)}}}"
    return Family(
        name=f"sphere{d}", domain="weibull", law_label=label,
        sampler=lambda rng, n, rows: 2.0 * rng.beta(a, a, size=(rows, n)) - 1.0,
        kappa_bar_formula=kappa_bar,
        law_formula=lambda n: a * (endpoint_constant * n) ** (1.0 / a),
        survival=lambda x: beta_law.sf((np.asarray(x) + 1.0) / 2.0),
        upper_quantile=lambda n: 1.0 - 2.0 * beta_law.ppf(1.0 / n),
        params={"d": d},
        weibull_alpha=a,
    )


def _planted_rows(rng: np.random.Generator, n: int, rows: int, top: float, width: float) -> np.ndarray:
    """Column 0 at ``top``; the other ``n - 1`` columns i.i.d. uniform on ``[-width, 0]``."""
    out = -width * rng.random((rows, n))  # (rows, n)
    out[:, 0] = top
    return out


def planted(g: float = 1.0, w: float = 1.0) -> Family:
    """Planted row: one score :math:`g` above a bulk uniform on :math:`[-w, 0]`; :math:`\\bar\\kappa_n = \\log n/g`.

    Theorem 8 (theory.md §4.2): first-order transition at :math:`\\beta = \\log n/g`.
    """
    g = as_number(g, "planted: g", minimum=0, strict=True)
    w = as_number(w, "planted: w", minimum=0)
    name = "planted" if (g == 1 and w == 1) else f"planted_g{_number(g)}_w{_number(w)}"
    label = r"\log n" if g == 1 else rf"\log n/{_number(g)}"
    return Family(
        name=name, domain="step", law_label=label,
        sampler=lambda rng, n, rows: _planted_rows(rng, n, rows, g, w),
        kappa_bar_formula=lambda n: np.log(n) / g,
        law_formula=lambda n: np.log(n) / g,
        params={"g": g, "w": w},
    )


def simplex(rho: float = 0.5, eta: float = 0.05) -> Family:
    """Chen et al.'s (almost) simplex row: a self-score 1 and competitors :math:`\\rho + \\eta U(-1,1)`.

    :math:`\\bar\\kappa_n = \\log n/(1-\\rho)`, reproducing :math:`\\gamma_c = 1/(1-\\rho)`
    (Theorem 8, theory.md §4.2).  Requires :math:`\\rho + \\eta < 1` so the self-score is the maximum.
    """
    rho = as_number(rho, "simplex: rho")
    eta = as_number(eta, "simplex: eta", minimum=0)
    if not rho + eta < 1:
        raise ValueError(f"simplex: need rho + eta < 1 (the self-score 1 must be the maximum), got rho={rho}, eta={eta}")

    def sample_rows(rng: np.random.Generator, n: int, rows: int) -> np.ndarray:
        out = rho + eta * (2.0 * rng.random((rows, n)) - 1.0)  # (rows, n)
        out[:, 0] = 1.0
        return out

    name = "simplex" if (rho == 0.5 and eta == 0.05) else f"simplex_rho{_number(rho)}_eta{_number(eta)}"
    return Family(
        name=name, domain="step", law_label=rf"\log n/{_number(1 - rho)}",
        sampler=sample_rows,
        kappa_bar_formula=lambda n: np.log(n) / (1.0 - rho),
        law_formula=lambda n: np.log(n) / (1.0 - rho),
        params={"rho": rho, "eta": eta},
    )


def planted_shrink(c: float = 1.0, w: float = 1.0) -> Family:
    """Planted row with shrinking margin :math:`g_n = c/\\log n`: :math:`\\bar\\kappa_n = (\\log n)^2/c` (theory.md §4.1).

    Needs ``n >= 2`` (the margin is infinite at ``n = 1``).
    """
    c = as_number(c, "planted_shrink: c", minimum=0, strict=True)
    w = as_number(w, "planted_shrink: w", minimum=0)
    name = "planted_shrink" if (c == 1 and w == 1) else f"planted_shrink_c{_number(c)}_w{_number(w)}"
    return Family(
        name=name, domain="step", law_label=r"(\log n)^2" if c == 1 else rf"(\log n)^2/{_number(c)}",
        sampler=lambda rng, n, rows: _planted_rows(rng, n, rows, c / np.log(n), w),
        kappa_bar_formula=lambda n: np.log(n) ** 2 / c,
        law_formula=lambda n: np.log(n) ** 2 / c,
        params={"c": c, "w": w},
        min_n=2,
    )


def pareto(alpha: float) -> Family:
    """Pareto scores, :math:`\\bar F(x) = x^{-\\alpha}` on :math:`x \\ge 1` (Fréchet class, theory.md §4.1).

    ``kappa_bar`` is the hazard scale :math:`n f(u_n) = \\alpha n^{-1/\\alpha}`; §4.1 explains that the
    accumulation scale is :math:`\\approx \\log n / M_n` instead, so :math:`\\kappa/\\bar\\kappa_n` drifts like
    :math:`\\log n` for this family.
    """
    alpha = as_number(alpha, "pareto: alpha", minimum=0, strict=True)
    hazard = lambda n: alpha * n ** (-1.0 / alpha)  # noqa: E731
    return Family(
        name=f"pareto{_number(alpha)}", domain="frechet",
        law_label=r"n^{-1}" if alpha == 1 else rf"{_number(alpha)}\,n^{{-1/{_number(alpha)}}}",
        # inverse-cdf sampling: U^{-1/alpha} with U in (0, 1]
        sampler=lambda rng, n, rows: (1.0 - rng.random((rows, n))) ** (-1.0 / alpha),
        kappa_bar_formula=hazard, law_formula=hazard,
        survival=lambda x: np.where(x > 1, np.power(np.maximum(x, 1.0), -alpha), 1.0),
        upper_quantile=lambda n: n ** (1.0 / alpha),
        params={"alpha": alpha},
    )


STANDARD: tuple[str, ...] = (
    "gauss", "ptail1", "ptail3", "logexp", "edge", "unif",
    "sphere3", "sphere5", "sphere9", "planted", "simplex", "planted_shrink",
)
"""The 12 families of theory.md §5, in its index order (``fam_idx`` of the seeds)."""

_FIXED = {
    "gauss": gauss, "logexp": logexp, "edge": edge, "unif": unif,
    "planted": planted, "simplex": simplex, "planted_shrink": planted_shrink,
}
_PARAMETRIC = {
    "ptail": (re.compile(r"ptail(\d+(?:\.\d+)?)"), lambda v: ptail(float(v))),
    "sphere": (re.compile(r"sphere(\d+)"), lambda v: sphere(int(v))),
    "pareto": (re.compile(r"pareto(\d+(?:\.\d+)?)"), lambda v: pareto(float(v))),
}


def names() -> tuple[str, ...]:
    """The standard names plus the two Pareto families of the extra ladder runs."""
    return STANDARD + ("pareto1", "pareto2")


def get(name: str | Family) -> Family:
    """Look up a family by name: ``"gauss"``, ``"ptail3"`` (any ``ptail<p>``), ``"sphere5"`` (any
    ``sphere<d>``), ``"pareto2"`` (any ``pareto<alpha>``), ``"logexp"``, ``"edge"``, ``"unif"``,
    ``"planted"``, ``"simplex"``, ``"planted_shrink"``.  A :class:`Family` is returned unchanged.
    """
    if isinstance(name, Family):
        return name
    if not isinstance(name, str):
        raise ValueError(f"family name must be a string, got {type(name).__name__}")
    key = name.strip().lower()
    if key in _FIXED:
        return _FIXED[key]()
    for pattern, make in _PARAMETRIC.values():
        match = pattern.fullmatch(key)
        if match:
            return make(match.group(1))
    raise ValueError(f"unknown family {name!r}; known: {', '.join(names())} "
                     "(ptail<p>, sphere<d>, pareto<alpha> take any parameter)")


def family_rows(family: Union[str, Family], n: int, rows: int, seed: Union[int, Sequence[int]],
                stream: Optional[int] = None) -> np.ndarray:
    """Seeded rows of one family: ``(rows, n)`` scores drawn with ``default_rng([*seed, stream, n])``.

    The seeding convention of theory.md §5 and of every chapter of the book: ``stream`` defaults to
    the family's index in :data:`STANDARD` (``fam_idx``), so ``family_rows("gauss", 1024, 10, 12697)``
    draws with ``default_rng([12697, 0, 1024])``; a family outside :data:`STANDARD` needs an explicit
    ``stream``.  ``seed`` is a non-negative integer or a sequence of them.  ``n`` and ``rows`` are
    validated before the generator is built, so a non-integer ``n`` is reported as such.

    Test: ``tests/test_families.py::test_family_rows_follows_the_seed_convention`` (the rows equal
    the notebooks' own construction bit for bit; a wrong stream index or seed order would differ).
    """
    fam = get(family)
    n = as_integer(n, f"{fam.name}: n", fam.min_n)
    rows = as_integer(rows, f"{fam.name}: rows", 0)
    seeds = as_seed(seed)
    if stream is None:
        if fam.name not in STANDARD:
            raise ValueError(f"{fam.name} is not one of the standard families {STANDARD}: pass stream= "
                             "(the middle entry of the seed) explicitly")
        stream = STANDARD.index(fam.name)
    stream = as_integer(stream, "stream", 0)
    return fam.sample(n, rows, np.random.default_rng([*seeds, stream, n]))  # (rows, n)
