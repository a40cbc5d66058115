"""Null heads: inputs whose answer is known by construction, read by the same code as the model's.

Every statistic of a head is set beside the same statistic computed by the same stages over the same
design (levels, queries per level, window length, suffix or prefix; :mod:`.design`) on these nulls:

==============  ======  =====================================================================  ===========
null            kind    construction (and what is known about it)                              known law
==============  ======  =====================================================================  ===========
``gauss_qk``    q/k     i.i.d. N(0, I) queries and keys: given its query a row is i.i.d.        linear
                        Gaussian, Gumbel class, kappa_bar ~ sqrt(2 log n)
``sink_qk``     q/k     the same, but every query has component ``a`` along one direction u     step, sink
                        and the key at position 0 of every forward is ``b u``: that key stands
                        :data:`SINK_MARGIN` bulk standard deviations above the typical bulk
                        maximum (a planted row, Theorem 8, whose planted key is the first token)
``ptail1``      rows    exponential scores, kappa_bar = 1 exactly (no rescaling keeps c flat)    linear
``ptail2``      rows    Weibull-tail scores, kappa_bar = 2 sqrt(log n) exactly                  linear
                        (sqrt(2 log n) keeps c flat)
``logexp``      rows    log-exponential scores, kappa_bar = log n exactly (SSMax's s log n)      linear
``edge``        rows    endpoint singularity, kappa_bar = (log n)^2 exactly                     linear
``unif``        rows    scores uniform on an interval: Weibull class, alpha = 1                 power
``sphere9``     rows    q.k with k uniform on the sphere S^8: Weibull, alpha = 4 (reads linear)  power
``planted``     rows    one score a margin g = 1 above a uniform bulk, kappa_bar = log n         step
``planted_shrink`` rows planted with margin 1/log n, kappa_bar = (log n)^2                       step
==============  ======  =====================================================================  ===========

The row nulls are the reference families of the ladder (:mod:`critscale.families`), each row of the length the
design gives it; they calibrate the scale-free readings (law, law shares, gamma, rule), their operating point
in the family's own units.  The q/k nulls go through the model's q/k stage (:func:`qk_source`).
The reference slope of each rescaling rule is that of a null whose exact scale is the rule (:data:`RULE_NULLS`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

from critscale import families, rules
from critscale.fitting import slope

from .design import Design
from .rows import row_statistics
from .windows import ArraySource


@dataclass(frozen=True)
class Null:
    """One null head: its construction in words, its kind, and what it is known to be."""

    name: str
    kind: str  # "qk" (through the q/k stage) or "rows" (a family of critscale.families)
    description: str
    law: str  # the law it has by construction
    family: str | None = None  # critscale.families name (rows nulls; the conditional law of gauss_qk)


NULLS = {
    "gauss_qk": Null("gauss_qk", "qk", "i.i.d. Gaussian queries and keys (Gumbel class, kappa_bar ~ sqrt(2 log n))",
                     "linear", "gauss"),
    "sink_qk": Null("sink_qk", "qk", "Gaussian queries and keys with the first key of every forward aligned "
                    "with every query (planted row, sink)", "step"),
    "ptail1": Null("ptail1", "rows", "exponential scores, kappa_bar = 1", "linear", "ptail1"),
    "ptail2": Null("ptail2", "rows", "scores with tail exp(-x^2), kappa_bar = 2 sqrt(log n)", "linear", "ptail2"),
    "logexp": Null("logexp", "rows", "log-exponential scores, kappa_bar = log n", "linear", "logexp"),
    "edge": Null("edge", "rows", "endpoint singularity exp(-1/u), kappa_bar = (log n)^2", "linear", "edge"),
    "unif": Null("unif", "rows", "scores uniform on an interval (Weibull, alpha = 1)", "power", "unif"),
    "sphere9": Null("sphere9", "rows", "q.k with keys uniform on the sphere S^8 (Weibull, alpha = 4)", "power",
                    "sphere9"),
    "planted": Null("planted", "rows", "one score a margin 1 above a uniform bulk, kappa_bar = log n", "step",
                    "planted"),
    "planted_shrink": Null("planted_shrink", "rows", "planted with margin 1/log n, kappa_bar = (log n)^2", "step",
                           "planted_shrink"),
}
DEFAULT_NULLS = tuple(NULLS)

# A rescaling rule beta_rule(n) keeps the operating point c = beta/kappa flat for a head whose kappa grows like
# beta_rule(n).  The reference exponent of each rule is therefore the slope that the same code measures on a null of
# the head's law whose exact scale kappa_bar_n is that rule up to a constant (:data:`RULE_NULLS`), not the rule's
# asymptotic exponent: at these n the statistic's own finite-n behaviour (theory.md §5.1) moves every slope, and
# differently for a Gumbel row (``logexp``) and a planted row (``planted``) with the same kappa_bar_n = log n.
# Heads read as ``power`` (Weibull) have kappa growing like a power of n, which no rule (all powers of log n)
# matches. YaRN is 1 inside its training context and the entropy-invariant rule is SSMax's log n up to a constant,
# so they tie with ``none`` and ``ssmax``.
RULES = ("none", "sqrt_2_log_n", "ssmax", "log_n_squared")
RULE_NULLS = {"linear": {"none": "ptail1", "sqrt_2_log_n": "ptail2", "ssmax": "logexp", "log_n_squared": "edge"},
              "step": {"ssmax": "planted", "log_n_squared": "planted_shrink"},
              "power": {}}
"""Per law of a head: for each rule, the null of that law whose exact scale is the rule up to a constant."""
RULE_LABEL = {"none": "none/yarn", "sqrt_2_log_n": "sqrt_2_log_n", "ssmax": "ssmax/entropy_invariant",
              "log_n_squared": "log_n_squared"}
"""How each audited growth law is labelled in the data (schedules and tables keep these labels).  The reader sees
:data:`.verdict.RULE_WORDS` instead: ``none/yarn`` reads "constant beta", since YaRN's factor is 1 only inside its
training context and grows beyond it."""

SINK_MARGIN = 4.0  # sink_qk: planted logit above the typical bulk maximum at n = T, in bulk standard deviations


class NullError(ValueError):
    """An unknown null name."""


def check_names(names) -> tuple[str, ...]:
    """The null names, validated (at least one, each known and given once; the rule audit uses those of
    :data:`RULE_NULLS` given)."""
    if isinstance(names, str):
        raise NullError(f"nulls must be a sequence of names, got the string {names!r} (write ({names!r},))")
    names = tuple(names)
    if not names:
        raise NullError(f"no null heads given: every statistic needs its null; choose from {', '.join(NULLS)}")
    unknown = [n for n in names if n not in NULLS]
    if unknown:
        raise NullError(f"unknown null {', '.join(unknown)}; known: {', '.join(NULLS)}")
    repeated = sorted({n for n in names if names.count(n) > 1}, key=names.index)
    if repeated:
        raise NullError(f"null {', '.join(repeated)} is given more than once; name each null once")
    return names


def rule_slope(rule: str, lengths) -> float:
    """Slope of log beta_rule(n) on log log n at ``lengths`` (0, 1/2, 1, 2: the rule's own exponent)."""
    lengths = np.asarray(lengths, dtype=np.float64)
    x = np.log(np.log(lengths))
    fn = (lambda n: np.ones_like(n)) if rule == "none" else rules.RULES[rule]
    return slope(x, np.log(np.asarray(fn(lengths), dtype=np.float64)))


def exact_slope(name: str, lengths) -> float:
    """Slope of log kappa_bar_n (exact, :mod:`critscale.families`) on log log n at ``lengths``; NaN if none."""
    family = NULLS[name].family
    if family is None or len(lengths) < 2:
        return float("nan")
    lengths = np.asarray(lengths, dtype=np.float64)
    x = np.log(np.log(lengths))
    return slope(x, np.log(np.asarray(families.get(family).kappa_bar(lengths), dtype=np.float64)))


UNIT_SPREAD_ROWS = 2048  # rows per length of the draw that measures a unit Gaussian head's median row spread


@functools.lru_cache(maxsize=32)
def unit_spread(design: Design, head_dim: int) -> float:
    """Median row spread of i.i.d. N(0, I) queries and keys at logit scale ``1/sqrt(head_dim)`` over ``design``.

    Slightly below 1 (a row's spread is ``|q|/sqrt(d)`` times the standard deviation of its ``n``
    logits): measured on a fixed draw of :data:`UNIT_SPREAD_ROWS` rows per length, with the design's
    row lengths, so that the Gaussian nulls' median spread is the input's, not 1% off.
    """
    rng = np.random.default_rng([int(head_dim), design.window_length, 7919])
    d, groups, spreads = int(head_dim), 32, []
    for n in design.levels:
        per = UNIT_SPREAD_ROWS // groups  # queries per set of keys
        lengths = np.resize(design.row_lengths(n), per)  # (per,)
        q = rng.standard_normal((groups, per, d), dtype=np.float32)
        k = rng.standard_normal((groups, int(n), d), dtype=np.float32)
        logits = (q @ k.transpose(0, 2, 1)).astype(np.float64) / math.sqrt(d)  # (G, per, n)
        valid = np.arange(int(n)) < lengths[:, None]  # (per, n)
        mean = np.where(valid, logits, 0.0).sum(axis=-1) / lengths  # (G, per)
        spreads.append(np.sqrt(np.where(valid, (logits - mean[..., None]) ** 2, 0.0).sum(axis=-1) / lengths).ravel())
    return float(np.median(np.concatenate(spreads)))


def gauss_scale(spread: float, head_dim: int, design: Design) -> float:
    """Logit scale of Gaussian q/k heads of dimension ``head_dim`` whose rows have median spread ``spread``.

    A logit ``q . k`` of i.i.d. N(0, I) vectors has variance ``head_dim``: the scale is ``spread / sqrt(head_dim)``,
    divided by :func:`unit_spread` (the median spread of such rows at scale ``1/sqrt(head_dim)``).
    """
    return float(spread) / math.sqrt(int(head_dim)) / unit_spread(design, head_dim)


def replicate_source(design: Design, windows: int, count: int, head_dim: int, spread: float,
                     rng: np.random.Generator) -> ArraySource:
    """``count`` independent ``gauss_qk`` heads of ``windows`` windows each, as the heads of one layer.

    Each is read over the input's own design and windows, so the spread of a statistic over them is the
    sampling distribution of that statistic for a head without structure (:mod:`.inference`).
    """
    shape = (1, int(count), int(windows), design.window_length, int(head_dim))  # (1, R, W, T, d_h)
    q = rng.standard_normal(shape, dtype=np.float32)
    k = rng.standard_normal(shape, dtype=np.float32)
    return ArraySource(torch.from_numpy(q), torch.from_numpy(k), gauss_scale(spread, head_dim, design), causal=design.causal)


def qk_source(name: str, design: Design, windows: int, head_dim: int, spread: float,
              rng: np.random.Generator) -> ArraySource:
    """The q/k null ``name`` as an :class:`.windows.ArraySource` of one layer and one head.

    It goes through the same q/k stage as the model with the input's head dimension, and its logits are scaled
    to the input's median row ``spread`` (:func:`gauss_scale`), so that its operating point (p_max, entropy,
    beta_1/2 at beta = 1) is that of a head with the same logit spread and no structure.
    """
    T, d = design.window_length, int(head_dim)
    q = rng.standard_normal((1, 1, windows, T, d)).astype(np.float32)  # (1, 1, W, T, d_h)
    k = rng.standard_normal((1, 1, windows, T, d)).astype(np.float32)
    if name == "gauss_qk":
        return ArraySource(torch.from_numpy(q), torch.from_numpy(k), gauss_scale(spread, d, design), causal=design.causal)
    a = math.sqrt(d)  # every query's component along u = e_0
    q[..., 0] = a
    bulk = math.sqrt(a * a + d - 1)  # |q|: a bulk logit q.k_j is N(0, |q|^2) before scaling
    scale = spread / bulk  # bulk logits have standard deviation `spread`
    b = bulk * (math.sqrt(2 * math.log(T)) + SINK_MARGIN) / a  # planted logit scale * a * b
    first_key = np.zeros((1, 1, d), dtype=np.float32)
    first_key[..., 0] = b
    return ArraySource(torch.from_numpy(q), torch.from_numpy(k), scale, causal=design.causal,
                       first_key=torch.from_numpy(first_key))


def family_statistics(name: str, design: Design, windows: int, rng: np.random.Generator) -> list[dict]:
    """Statistics of the row null ``name`` over the design: one chunk per level, labelled like a head."""
    family = families.get(NULLS[name].family)
    m = design.queries
    chunks = []
    for n in design.levels:
        lengths = design.row_lengths(n)
        rows = np.full((windows, m, n), -np.inf)  # (W, m, n)
        for j, length in enumerate(lengths):
            rows[:, j, :length] = family.sample(int(length), windows, rng)
        stats = row_statistics(rows.reshape(-1, n))
        window, query = np.meshgrid(np.arange(windows), np.arange(m), indexing="ij")
        chunks.append({"layer": np.zeros(windows * m, dtype=int), "head": np.zeros(windows * m, dtype=int),
                       "window": window.ravel(), "level": np.full(windows * m, n), "query": query.ravel(), **stats})
    return chunks
