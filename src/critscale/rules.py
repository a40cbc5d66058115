"""Rescaling rules of the literature: the multiplier of the logits as a function of the length ``n``.

The table of theory.md §2.  Each rule returns the factor :math:`\\beta_n` by which the attention
logits are multiplied (so that, for example, SSMax's ``s log n`` and YaRN's squared attention factor
are directly comparable).  In the gap-counting framework a rule "matches" a score family when
:math:`\\beta_n/\\bar\\kappa_n` stays flat in ``n`` (theory.md §4.1 and P-11, §6).

All functions accept a scalar or an array ``n`` (``n >= 1``) and return a float or an array.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

__all__ = [
    "N_TRAIN",
    "sqrt_2_log_n",
    "ssmax",
    "log_n_squared",
    "yarn",
    "entropy_invariant",
    "RULES",
    "RULE_LABELS",
    "CITATIONS",
]

N_TRAIN = 4096
"""Default training length of the length-extrapolation rules (the value used in theory.md §4.1)."""


def _as_n(n: Any, name: str = "n") -> np.ndarray:
    arr = np.asarray(n, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr < 1):
        raise ValueError(f"{name} must be finite and >= 1, got {n!r}")
    return arr


def _out(arr: np.ndarray) -> Any:
    return float(arr) if np.ndim(arr) == 0 else arr


def sqrt_2_log_n(n: Any) -> Any:
    """:math:`\\sqrt{2\\log n}`: the Gaussian (REM) critical scale.

    Sources: Derrida's random energy model freezes at :math:`\\beta_c = \\sqrt{2\\log n}` (Derrida 1981);
    Anson, Wang & Aitchison, *Scale-invariant attention*, arXiv:2505.17083 (Gaussian logits); the
    "nor" blog note on long-context attention (2025-11-27).  theory.md §2.
    """
    return _out(np.sqrt(2.0 * np.log(_as_n(n))))


def ssmax(n: Any, s: float = 0.43) -> Any:
    """:math:`s\\log n`: Scalable-Softmax (SSMax).

    Source: Nakanishi, *Scalable-Softmax Is Superior for Attention*, arXiv:2501.19399; the logits
    :math:`z_i` are replaced by :math:`(s\\log n) z_i`, and its Fig. 1 uses ``s = 0.43``.  theory.md §2.
    """
    if not np.isfinite(s) or s <= 0:
        raise ValueError(f"ssmax: s must be finite and > 0, got {s}")
    return _out(s * np.log(_as_n(n)))


def log_n_squared(n: Any) -> Any:
    """:math:`(\\log n)^2`: the third law of the abstract of arXiv:2605.12697.

    In the gap-counting framework it is the critical scale of rows with an endpoint singularity
    :math:`\\bar F(\\omega - u) = e^{-1/u}` or a planted margin shrinking like :math:`1/\\log n`
    (theory.md §4.1); YaRN's factor (:func:`yarn`) grows like :math:`(\\log n)^2/100`.  theory.md §2.
    """
    return _out(np.log(_as_n(n)) ** 2)


def yarn(n: Any, n_train: Any = N_TRAIN) -> Any:
    """:math:`(0.1\\ln s + 1)^2` with :math:`s = n/n_{\\rm train}`: YaRN's attention factor, applied to q and k.

    Source: Peng et al., *YaRN: Efficient Context Window Extension of Large Language Models*,
    arXiv:2309.00071: :math:`\\sqrt{1/t} = 0.1\\ln s + 1` multiplies both queries and keys, so the
    logits are multiplied by its square.  As in public implementations (``_yarn_get_mscale``), the
    factor is 1 when :math:`s \\le 1` (no extension).  theory.md §2.
    """
    ratio = _as_n(n) / _as_n(n_train, "n_train")
    factor = np.where(ratio > 1, 0.1 * np.log(np.maximum(ratio, 1.0)) + 1.0, 1.0)
    return _out(factor**2)


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
    return _out(np.log(_as_n(n)) / np.log(train))


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
