"""Random score families: samplers and their deterministic accumulation scales (theory.md §4.1).

Each family is one row model.  For i.i.d. scores with survival function :math:`\\bar F` the scale is the
hazard at the :math:`1/n`-quantile,

.. math::

    \\bar\\kappa_n = n f(u_n) = f(u_n)/\\bar F(u_n),\\qquad u_n = \\bar F^{-1}(1/n)

(theory.md §4, also the inverse Gumbel normalising constant).  For the planted families it is the
exact :math:`\\log n / g`.  ``kappa_bar`` is exact (closed form or scipy's exact quantile and
density); ``law`` is the leading-order law of the §4.1 table.

The families (names accepted by :func:`get`):

======================  ======================================================  ===========================================  =========
name                    one row                                                 :math:`\\bar\\kappa_n` (exact)                domain
======================  ======================================================  ===========================================  =========
``gauss``               i.i.d. :math:`N(0,1)`                                   :math:`n\\varphi(u_n)`                        gumbel
``ptail<p>``            :math:`E^{1/p}`, :math:`\\bar F(x)=e^{-x^p}`             :math:`p(\\log n)^{1-1/p}`                    gumbel
``logexp``              :math:`\\log E`, :math:`\\bar F(x)=e^{-e^x}`              :math:`\\log n`                              gumbel
``edge``                :math:`-1/E`, :math:`\\bar F(-u)=e^{-1/u}`               :math:`(\\log n)^2`                          gumbel
``unif``                :math:`U(0,1)`                                          :math:`n`                                    weibull
``sphere<d>``           :math:`\\langle q,k\\rangle`, :math:`k` uniform on         :math:`n f(u_n)`, :math:`f` the density of     weibull
                        :math:`S^{d-1}`: :math:`2B-1`,                          :math:`2B-1`
                        :math:`B\\sim\\mathrm{Beta}(\\frac{d-1}2,\\frac{d-1}2)`
``planted``             one score :math:`g=1` above :math:`n-1` i.i.d.           :math:`\\log n/g`                            step
                        :math:`-wU(0,1)`, :math:`w=1`
``simplex``             one score 1, :math:`n-1` i.i.d.                          :math:`\\log n/(1-\\rho)`                     step
                        :math:`\\rho+\\eta U(-1,1)`, :math:`\\rho=0.5,\\eta=0.05`
``planted_shrink``      planted with margin :math:`g_n = 1/\\log n`, :math:`w=1`  :math:`(\\log n)^2`                          step
``pareto<a>``           Pareto, :math:`\\bar F(x)=x^{-\\alpha}`, :math:`x\\ge1`     :math:`\\alpha n^{-1/\\alpha}` (hazard)        frechet
======================  ======================================================  ===========================================  =========

(:math:`E` is Exp(1), :math:`U` uniform.)  Derivations, one line each:

- ``ptail``: :math:`u_n = (\\log n)^{1/p}` and :math:`f/\\bar F = p x^{p-1}`.
- ``logexp``: :math:`u_n = \\log\\log n` and :math:`f/\\bar F = e^x`.
- ``edge(c, q)``: :math:`s = -(c/E)^{1/q}` has :math:`P(s > -u) = P(E > c u^{-q}) = e^{-c u^{-q}}`, so
  :math:`u_n = (c/\\log n)^{1/q}` and :math:`n f(-u_n) = c q u_n^{-q-1} = q c^{-1/q}(\\log n)^{1+1/q}`:
  :math:`(\\log n)^2` for the default :math:`c = q = 1`.
- ``sphere``: near the endpoint :math:`\\bar F(1-u) \\sim C u^\\alpha` with :math:`\\alpha = (d-1)/2` and
  :math:`C = 2^{-\\alpha}/(\\alpha B(\\alpha,\\alpha))`, so ``law`` is :math:`\\alpha (Cn)^{1/\\alpha}`;
  ``kappa_bar`` uses the symmetry of the Beta law to evaluate :math:`u_n` through ``ppf(1/n)``
  (no cancellation near the endpoint).
- ``pareto``: the hazard scale is *not* the right critical scale for heavy tails (theory.md §4.1,
  Fréchet row); it is what ``kappa_bar`` returns so that the ratio :math:`\\kappa/\\bar\\kappa_n`
  can show the drift.

Every sampler is vectorised over rows and takes a ``numpy.random.Generator``; the planted entry is
column 0 (positions never matter to the statistics).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional

import numpy as np
from scipy import special, stats

__all__ = [
    "Family",
    "STANDARD",
    "get",
    "names",
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

DOMAINS = ("gumbel", "weibull", "step", "frechet")


def _check_n(n: Any) -> np.ndarray:
    """Validate a row length (scalar or array of positive integers-as-floats)."""
    arr = np.asarray(n, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr < 1):
        raise ValueError(f"n must be finite and >= 1, got {n!r}")
    return arr


def _as_output(arr: np.ndarray) -> Any:
    """Return a Python float for 0-d results, the array otherwise."""
    return float(arr) if np.ndim(arr) == 0 else arr


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
    weibull_alpha:
        the endpoint exponent :math:`\\alpha` (Weibull families only), the ``alpha`` of
        :func:`critscale.limits.weibull_gaps`.
    """

    name: str
    domain: str
    law_label: str
    _sample_rows: Callable[[np.random.Generator, int, int], np.ndarray] = field(repr=False)
    _kappa_bar: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    _law: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    _sf: Optional[Callable[[np.ndarray], np.ndarray]] = field(default=None, repr=False)
    _quantile: Optional[Callable[[np.ndarray], np.ndarray]] = field(default=None, repr=False)
    params: dict = field(default_factory=dict)
    weibull_alpha: Optional[float] = None
    min_n: int = 1

    @property
    def iid(self) -> bool:
        return self._sf is not None

    def sample(self, n: int, rows: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``rows`` independent rows of length ``n``: a ``(rows, n)`` float64 array."""
        if isinstance(n, bool) or int(n) != n or n < self.min_n:
            raise ValueError(f"{self.name}: n must be an integer >= {self.min_n}, got {n!r}")
        if isinstance(rows, bool) or int(rows) != rows or rows < 0:
            raise ValueError(f"{self.name}: rows must be an integer >= 0, got {rows!r}")
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"{self.name}: rng must be a numpy.random.Generator, got {type(rng).__name__}")
        out = np.asarray(self._sample_rows(rng, int(n), int(rows)), dtype=np.float64)  # (rows, n)
        return out

    def kappa_bar(self, n: Any) -> Any:
        """Exact deterministic accumulation scale :math:`\\bar\\kappa_n` (theory.md §4, §4.1)."""
        arr = _check_n(n)
        if np.any(arr < self.min_n):
            raise ValueError(f"{self.name}: n must be >= {self.min_n}")
        return _as_output(self._kappa_bar(arr))

    def law(self, n: Any) -> Any:
        """Leading-order law of :math:`\\bar\\kappa_n` (the §4.1 table), e.g. :math:`\\sqrt{2\\log n}`."""
        arr = _check_n(n)
        return _as_output(self._law(arr))

    def sf(self, x: Any) -> Any:
        """Survival function :math:`\\bar F(x) = P(s > x)` of one score (i.i.d. families only)."""
        if self._sf is None:
            raise ValueError(f"{self.name} is not an i.i.d. family: it has no single-score survival function")
        return _as_output(self._sf(np.asarray(x, dtype=np.float64)))

    def quantile(self, n: Any) -> Any:
        """The :math:`1/n`-upper quantile :math:`u_n = \\bar F^{-1}(1/n)` (i.i.d. families only)."""
        if self._quantile is None:
            raise ValueError(f"{self.name} is not an i.i.d. family: it has no quantile u_n")
        return _as_output(self._quantile(_check_n(n)))


def _fraction_label(frac: Fraction) -> str:
    return str(frac.numerator) if frac.denominator == 1 else f"{frac.numerator}/{frac.denominator}"


def _number(x: float) -> str:
    return f"{x:g}"


def gauss() -> Family:
    """Standard Gaussian scores; :math:`\\bar\\kappa_n = n\\varphi(u_n) \\sim \\sqrt{2\\log n}` (REM; theory.md §4.1)."""
    norm = stats.norm()
    return Family(
        name="gauss", domain="gumbel", law_label=r"\sqrt{2\log n}",
        _sample_rows=lambda rng, n, rows: rng.standard_normal((rows, n)),
        _kappa_bar=lambda n: n * norm.pdf(norm.isf(1.0 / n)),
        _law=lambda n: np.sqrt(2.0 * np.log(n)),
        _sf=norm.sf, _quantile=lambda n: norm.isf(1.0 / n),
    )


def ptail(p: float) -> Family:
    """Scores :math:`E^{1/p}` with :math:`\\bar F(x)=e^{-x^p}`; :math:`\\bar\\kappa_n = p(\\log n)^{1-1/p}` (theory.md §4.1)."""
    p = float(p)
    if not (np.isfinite(p) and p > 0):
        raise ValueError(f"ptail: p must be finite and > 0, got {p}")
    exponent = 1 - 1 / Fraction(p).limit_denominator(1000)
    if p == 1:
        label = "1"
    else:
        label = rf"{_number(p)}(\log n)^{{{_fraction_label(exponent)}}}"
    return Family(
        name=f"ptail{_number(p)}", domain="gumbel", law_label=label,
        _sample_rows=lambda rng, n, rows: rng.standard_exponential((rows, n)) ** (1.0 / p),
        _kappa_bar=lambda n: p * np.log(n) ** (1.0 - 1.0 / p) if p != 1 else np.ones_like(n),
        _law=lambda n: p * np.log(n) ** (1.0 - 1.0 / p) if p != 1 else np.ones_like(n),
        _sf=lambda x: np.where(x > 0, np.exp(-np.maximum(x, 0.0) ** p), 1.0),
        _quantile=lambda n: np.log(n) ** (1.0 / p),
        params={"p": p},
    )


def logexp() -> Family:
    """Scores :math:`\\log E`, :math:`\\bar F(x) = e^{-e^x}`; :math:`\\bar\\kappa_n = \\log n` (theory.md §4.1)."""
    return Family(
        name="logexp", domain="gumbel", law_label=r"\log n",
        _sample_rows=lambda rng, n, rows: np.log(rng.standard_exponential((rows, n))),
        _kappa_bar=lambda n: np.log(n),
        _law=lambda n: np.log(n),
        _sf=lambda x: np.exp(-np.exp(x)),
        _quantile=lambda n: np.log(np.log(n)),
    )


def edge(c: float = 1.0, q: float = 1.0) -> Family:
    """Endpoint singularity :math:`\\bar F(-u) = e^{-c u^{-q}}` at the endpoint 0 (theory.md §4.1).

    Scores :math:`-(c/E)^{1/q}`; :math:`\\bar\\kappa_n = q c^{-1/q}(\\log n)^{1+1/q}`, i.e.
    :math:`(\\log n)^2` for the default ``c = q = 1``.
    """
    c, q = float(c), float(q)
    if not (np.isfinite(c) and c > 0 and np.isfinite(q) and q > 0):
        raise ValueError(f"edge: c and q must be finite and > 0, got c={c}, q={q}")
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
        _sample_rows=lambda rng, n, rows: -(c / rng.standard_exponential((rows, n))) ** (1.0 / q),
        _kappa_bar=scale, _law=scale,
        _sf=sf, _quantile=lambda n: -(c / np.log(n)) ** (1.0 / q),
        params={"c": c, "q": q},
    )


def unif() -> Family:
    """Uniform scores on (0, 1): Weibull class with :math:`\\alpha = 1`; :math:`\\bar\\kappa_n = n` (theory.md §4.1)."""
    return Family(
        name="unif", domain="weibull", law_label="n",
        _sample_rows=lambda rng, n, rows: rng.random((rows, n)),
        _kappa_bar=lambda n: np.asarray(n, dtype=np.float64) * 1.0,
        _law=lambda n: np.asarray(n, dtype=np.float64) * 1.0,
        _sf=lambda x: np.clip(1.0 - x, 0.0, 1.0),
        _quantile=lambda n: 1.0 - 1.0 / n,
        weibull_alpha=1.0,
    )


def sphere(d: int) -> Family:
    """Scores :math:`\\langle q, k\\rangle` of a fixed unit query and keys uniform on :math:`S^{d-1}` (theory.md §4.1).

    The score is :math:`2B - 1` with :math:`B \\sim \\mathrm{Beta}(a, a)`, :math:`a = (d-1)/2`: Weibull class
    with :math:`\\alpha = a`; :math:`\\bar\\kappa_n = n f(u_n)` exactly, :math:`\\asymp n^{2/(d-1)}`
    (Bruno et al.'s polynomial law).
    """
    if isinstance(d, bool) or int(d) != d or d < 2:
        raise ValueError(f"sphere: d must be an integer >= 2, got {d!r}")
    d = int(d)
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
        _sample_rows=lambda rng, n, rows: 2.0 * rng.beta(a, a, size=(rows, n)) - 1.0,
        _kappa_bar=kappa_bar,
        _law=lambda n: a * (endpoint_constant * n) ** (1.0 / a),
        _sf=lambda x: beta_law.sf((np.asarray(x) + 1.0) / 2.0),
        _quantile=lambda n: 1.0 - 2.0 * beta_law.ppf(1.0 / n),
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
    g, w = float(g), float(w)
    if not (np.isfinite(g) and g > 0 and np.isfinite(w) and w >= 0):
        raise ValueError(f"planted: g must be finite and > 0 and w finite and >= 0, got g={g}, w={w}")
    name = "planted" if (g == 1 and w == 1) else f"planted_g{_number(g)}_w{_number(w)}"
    label = r"\log n" if g == 1 else rf"\log n/{_number(g)}"
    return Family(
        name=name, domain="step", law_label=label,
        _sample_rows=lambda rng, n, rows: _planted_rows(rng, n, rows, g, w),
        _kappa_bar=lambda n: np.log(n) / g,
        _law=lambda n: np.log(n) / g,
        params={"g": g, "w": w},
    )


def simplex(rho: float = 0.5, eta: float = 0.05) -> Family:
    """Chen et al.'s (almost) simplex row: a self-score 1 and competitors :math:`\\rho + \\eta U(-1,1)`.

    :math:`\\bar\\kappa_n = \\log n/(1-\\rho)`, reproducing :math:`\\gamma_c = 1/(1-\\rho)`
    (Theorem 8, theory.md §4.2).  Requires :math:`\\rho + \\eta < 1` so the self-score is the maximum.
    """
    rho, eta = float(rho), float(eta)
    if not (np.isfinite(rho) and np.isfinite(eta) and eta >= 0 and rho + eta < 1):
        raise ValueError(f"simplex: need finite rho, eta >= 0 and rho + eta < 1, got rho={rho}, eta={eta}")

    def sample_rows(rng: np.random.Generator, n: int, rows: int) -> np.ndarray:
        out = rho + eta * (2.0 * rng.random((rows, n)) - 1.0)  # (rows, n)
        out[:, 0] = 1.0
        return out

    name = "simplex" if (rho == 0.5 and eta == 0.05) else f"simplex_rho{_number(rho)}_eta{_number(eta)}"
    return Family(
        name=name, domain="step", law_label=rf"\log n/{_number(1 - rho)}",
        _sample_rows=sample_rows,
        _kappa_bar=lambda n: np.log(n) / (1.0 - rho),
        _law=lambda n: np.log(n) / (1.0 - rho),
        params={"rho": rho, "eta": eta},
    )


def planted_shrink(c: float = 1.0, w: float = 1.0) -> Family:
    """Planted row with shrinking margin :math:`g_n = c/\\log n`: :math:`\\bar\\kappa_n = (\\log n)^2/c` (theory.md §4.1).

    Needs ``n >= 2`` (the margin is infinite at ``n = 1``).
    """
    c, w = float(c), float(w)
    if not (np.isfinite(c) and c > 0 and np.isfinite(w) and w >= 0):
        raise ValueError(f"planted_shrink: c must be finite and > 0 and w finite and >= 0, got c={c}, w={w}")
    name = "planted_shrink" if (c == 1 and w == 1) else f"planted_shrink_c{_number(c)}_w{_number(w)}"
    return Family(
        name=name, domain="step", law_label=r"(\log n)^2" if c == 1 else rf"(\log n)^2/{_number(c)}",
        _sample_rows=lambda rng, n, rows: _planted_rows(rng, n, rows, c / np.log(n), w),
        _kappa_bar=lambda n: np.log(n) ** 2 / c,
        _law=lambda n: np.log(n) ** 2 / c,
        params={"c": c, "w": w},
        min_n=2,
    )


def pareto(alpha: float) -> Family:
    """Pareto scores, :math:`\\bar F(x) = x^{-\\alpha}` on :math:`x \\ge 1` (Fréchet class, theory.md §4.1).

    ``kappa_bar`` is the hazard scale :math:`n f(u_n) = \\alpha n^{-1/\\alpha}`; §4.1 explains that the
    accumulation scale is :math:`\\approx \\log n / M_n` instead, so :math:`\\kappa/\\bar\\kappa_n` drifts like
    :math:`\\log n` for this family.
    """
    alpha = float(alpha)
    if not (np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"pareto: alpha must be finite and > 0, got {alpha}")
    hazard = lambda n: alpha * n ** (-1.0 / alpha)  # noqa: E731
    return Family(
        name=f"pareto{_number(alpha)}", domain="frechet",
        law_label=r"n^{-1}" if alpha == 1 else rf"{_number(alpha)}\,n^{{-1/{_number(alpha)}}}",
        # inverse-cdf sampling: U^{-1/alpha} with U in (0, 1]
        _sample_rows=lambda rng, n, rows: (1.0 - rng.random((rows, n))) ** (-1.0 / alpha),
        _kappa_bar=hazard, _law=hazard,
        _sf=lambda x: np.where(x > 1, np.power(np.maximum(x, 1.0), -alpha), 1.0),
        _quantile=lambda n: n ** (1.0 / alpha),
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
