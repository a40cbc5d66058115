"""Rescaling rules of the literature: the multiplier of the logits as a function of the length ``n``.

The table of theory.md §2.  Each rule returns the factor :math:`\\beta_n` by which the attention
logits are multiplied (so that, for example, SSMax's ``s log n`` and YaRN's squared attention factor
are directly comparable).  In the gap-counting framework a rule "matches" a score family when
:math:`\\beta_n/\\bar\\kappa_n` stays flat in ``n`` (theory.md §4.1 and P-11, §6).

All rules accept a scalar or an array ``n`` (real, finite, ``n >= 1``; booleans and strings are
refused) and return a float or an array.

Two tools audit a rule against a score family (Proposition prop-10-rules, chapter 10): :func:`drift`,
the factor by which the operating point :math:`c = \\beta_{\\rm rule}(n)/\\bar\\kappa_n` moves between
two lengths, and :func:`loglog_exponent`, the effective exponent of a law in :math:`\\log\\log n`.
:func:`su_mean_field_entropy` is Su's mean-field entropy formula, the heuristic behind the
entropy-invariant rule (item 1 of prop-10-rules).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Union

import numpy as np

from . import families
from ._validate import as_beta, as_number, as_real, as_scores, scalar_or_array

__all__ = [
    "N_TRAIN",
    "sqrt_2_log_n",
    "ssmax",
    "log_n_squared",
    "yarn",
    "entropy_invariant",
    "drift",
    "loglog_exponent",
    "su_mean_field_entropy",
    "RULES",
    "RULE_LABELS",
    "CITATIONS",
]

N_TRAIN = 4096
"""Default training length of the length-extrapolation rules (the value used in theory.md §4.1)."""


def _as_n(n: Any, name: str = "n") -> np.ndarray:
    return as_real(n, name, minimum=1)


def sqrt_2_log_n(n: Any) -> Any:
    """:math:`\\sqrt{2\\log n}`: the Gaussian (REM) critical scale.

    Sources: Derrida's random energy model freezes at :math:`\\beta_c = \\sqrt{2\\log n}` (Derrida 1981);
    Anson, Wang & Aitchison, *Scale-invariant attention*, arXiv:2505.17083 (Gaussian logits); the
    "nor" blog note on long-context attention (2025-11-27).  theory.md §2.
    """
    return scalar_or_array(np.sqrt(2.0 * np.log(_as_n(n))))


def ssmax(n: Any, s: float = 0.43) -> Any:
    """:math:`s\\log n`: Scalable-Softmax (SSMax).

    Source: Nakanishi, *Scalable-Softmax Is Superior for Attention*, arXiv:2501.19399; the logits
    :math:`z_i` are replaced by :math:`(s\\log n) z_i`, and its Fig. 1 uses ``s = 0.43``.  theory.md §2.
    """
    s = as_number(s, "ssmax: s", minimum=0, strict=True)
    return scalar_or_array(s * np.log(_as_n(n)))


def log_n_squared(n: Any) -> Any:
    """:math:`(\\log n)^2`: the third law of the abstract of arXiv:2605.12697.

    In the gap-counting framework it is the critical scale of rows with an endpoint singularity
    :math:`\\bar F(\\omega - u) = e^{-1/u}` or a planted margin shrinking like :math:`1/\\log n`
    (theory.md §4.1); YaRN's factor (:func:`yarn`) grows like :math:`(\\log n)^2/100`.  theory.md §2.
    """
    return scalar_or_array(np.log(_as_n(n)) ** 2)


def yarn(n: Any, n_train: Any = N_TRAIN) -> Any:
    """:math:`(0.1\\ln s + 1)^2` with :math:`s = n/n_{\\rm train}`: YaRN's attention factor, applied to q and k.

    Source: Peng et al., *YaRN: Efficient Context Window Extension of Large Language Models*,
    arXiv:2309.00071: :math:`\\sqrt{1/t} = 0.1\\ln s + 1` multiplies both queries and keys, so the
    logits are multiplied by its square.  As in public implementations (``_yarn_get_mscale``), the
    factor is 1 when :math:`s \\le 1` (no extension).  theory.md §2.
    """
    ratio = _as_n(n) / _as_n(n_train, "n_train")
    factor = np.where(ratio > 1, 0.1 * np.log(np.maximum(ratio, 1.0)) + 1.0, 1.0)
    return scalar_or_array(factor**2)


def entropy_invariant(n: Any, n_train: Any = N_TRAIN) -> Any:
    """:math:`\\log n/\\log n_{\\rm train}`: Su's entropy-invariant softmax (the Qwen "logn-attn" rule).

    Sources: Su Jianlin (2021), *entropy invariance* derivation,
    https://kexue-tl.pages.dev/09034-A-Quick-Derivation-of-Entropy-Invariant-Softmax.html ; Qwen
    multiplies :math:`q` by :math:`\\log_{n_{\\rm train}} n` (Qwen's code uses 1 for
    :math:`n \\le n_{\\rm train}`; Su's formula, returned here, has no such floor).  Requires
    ``n_train > 1``.  theory.md §2.
    """
    train = _as_n(n_train, "n_train")
    if np.any(train <= 1):
        raise ValueError(f"n_train must be > 1, got {n_train!r}")
    return scalar_or_array(np.log(_as_n(n)) / np.log(train))


def drift(rule: Callable[[Any], Any], family: Union[str, "families.Family"], n: Any, n_ref: Any) -> Any:
    """Factor by which a rule's operating point :math:`c = \\beta_{\\rm rule}(n)/\\bar\\kappa_n` moves from ``n_ref`` to ``n``.

    .. math::

        \\frac{\\beta_{\\rm rule}(n)/\\bar\\kappa_n}{\\beta_{\\rm rule}(n_{\\rm ref})/\\bar\\kappa_{n_{\\rm ref}}}

    with the exact :math:`\\bar\\kappa_n` of :mod:`critscale.families`: item 3 of Proposition
    prop-10-rules (chapter 10; theory.md §4.1 and P-11 of §6).  A rule matches a family when this
    factor stays near 1 over every ``n``; the free constant of the rule (SSMax's ``s``, a base
    temperature) cancels.  ``rule`` is a callable of ``n`` (e.g. an entry of :data:`RULES`), ``n`` a
    scalar or array, ``n_ref`` a scalar.

    Test: ``tests/test_limits_rules.py::test_rules_audit_numbers_of_theory`` (the drifts quoted in
    theory.md §4.1: 0.58 for sqrt(2 log n) and 3.0 for (log n)^2 on planted rows; the inverse ratio,
    a plausible slip, gives 1.72 and 0.33).
    """
    fam = families.get(family)
    n = _as_n(n)
    n_ref = as_number(n_ref, "n_ref", minimum=1)

    def operating_point(m: Any) -> np.ndarray:
        return np.asarray(rule(m), dtype=np.float64) / fam.kappa_bar(m)

    return scalar_or_array(operating_point(n) / operating_point(n_ref))


def loglog_exponent(law: Callable[[Any], Any], n: Any, step: float = 1e-4) -> float:
    """Effective exponent :math:`d\\log f/d\\log\\log n` of a positive law ``f`` at one length ``n``.

    A central difference of half-width ``step`` in :math:`\\log\\log n`; the exponent is ``a`` for
    :math:`f = (\\log n)^a` (so 1/2 for :func:`sqrt_2_log_n`, 2 for :func:`log_n_squared`).  Used by
    chapter 10 (prop-10-rules, item 3) to name the family each rule matches.  ``n > 1`` is required
    (``log log n`` must exist).

    Test: ``tests/test_limits_rules.py::test_loglog_exponent_of_known_laws`` (exact powers of
    ``log n`` to 1e-7; a derivative in ``log n`` instead, a plausible slip, gives 1/log log n times it).
    """
    n = as_number(n, "n", minimum=1, strict=True)
    step = as_number(step, "step", minimum=0, strict=True)
    loglog = np.log(np.log(n))
    up, down = np.exp(np.exp(loglog + step)), np.exp(np.exp(loglog - step))
    return float((np.log(law(up)) - np.log(law(down))) / (2 * step))


def su_mean_field_entropy(scores: Any, beta: Any) -> Any:
    """Su's mean-field entropy :math:`\\log n - \\beta(s_{\\max} - \\bar s)` of each row, per beta.

    The heuristic behind the entropy-invariant rule (Su 2021, theory.md §2); item 1 of Proposition
    prop-10-rules (chapter 10) shows that it is the Legendre transform, hence the free energy
    :math:`-\\log p_{\\max}`, of a planted row, not its Shannon entropy.  ``n`` is the number of
    valid entries and :math:`\\bar s` their mean (``-inf`` entries are masked).  Returns
    ``(..., len(beta))`` (``(...)`` for a scalar ``beta``).

    Test: ``tests/test_limits_rules.py::test_su_mean_field_entropy_on_step_rows`` (on a step row
    :math:`(g, 0, \\dots, 0)` it equals :math:`\\Lambda(\\beta) + \\beta g/n` exactly as the chapter's
    proof says; the mean over all entries including the top, or ``n - 1`` for ``n``, would not).
    """
    conv = as_scores(scores)
    betas, scalar = as_beta(beta)
    values = conv.values  # (rows, n)
    valid = np.isfinite(values)  # (rows, n)
    count = valid.sum(axis=-1).astype(np.float64)  # (rows,)
    mean = np.where(valid, values, 0.0).sum(axis=-1) / count  # (rows,)
    gap = values.max(axis=-1) - mean  # (rows,)
    out = np.log(count)[:, None] - betas[None, :] * gap[:, None]  # (rows, m)
    if scalar:
        return conv.restore(out[:, 0])
    return conv.restore(out, (len(betas),))


RULES: dict[str, Callable[[Any], Any]] = {
    "sqrt_2_log_n": sqrt_2_log_n,
    "ssmax": ssmax,
    "log_n_squared": log_n_squared,
    "yarn": partial(yarn, n_train=N_TRAIN),
    "entropy_invariant": partial(entropy_invariant, n_train=N_TRAIN),
}
"""Name -> callable of ``n`` alone (length-extrapolation rules at ``n_train = N_TRAIN``), for the audit chapter."""

RULE_LABELS: dict[str, str] = {
    "sqrt_2_log_n": r"\sqrt{2\log n}",
    "ssmax": r"0.43\,\log n",
    "log_n_squared": r"(\log n)^2",
    "yarn": r"(0.1\ln(n/n_{\rm train})+1)^2",
    "entropy_invariant": r"\log n/\log n_{\rm train}",
}
"""LaTeX label of each rule."""

CITATIONS: dict[str, str] = {
    "sqrt_2_log_n": "Derrida 1981 (REM); Anson, Wang & Aitchison, arXiv:2505.17083",
    "ssmax": "Nakanishi, arXiv:2501.19399",
    "log_n_squared": "Hayase & Karakida, arXiv:2605.12697 (abstract)",
    "yarn": "Peng et al., arXiv:2309.00071",
    "entropy_invariant": "Su 2021 (kexue.fm 9034); Qwen logn-attn",
}
"""Short source of each rule."""
