"""Finite-size extrapolation (critscale.extrapolation), the fit behind chapters 06-08's limit tests."""

import numpy as np
import pytest

from critscale.extrapolation import extrapolate


def test_noiseless_model_is_recovered_exactly():
    """y = a + b/L + d/L^2 per family with a shared a: the fit returns a, b, d to rounding; with a shared
    first-order slope (and per-family second order) likewise."""
    L = np.log(2.0 ** np.arange(8, 20, 2))  # (6,)
    terms = np.stack([1 / L, 1 / L**2], axis=1)
    y = np.concatenate([0.5 + 0.3 / L - 0.2 / L**2, 0.5 - 1.0 / L + 2.0 / L**2])
    fit = extrapolate(np.vstack([terms, terms]), y, np.full(12, 1e-3), groups=["a"] * 6 + ["b"] * 6)
    assert fit.intercept == pytest.approx(0.5, abs=1e-10)
    assert np.allclose(fit.coefficients["a"], [0.3, -0.2]) and np.allclose(fit.coefficients["b"], [-1.0, 2.0])
    assert fit.dof == 12 - 5 and fit.chi2 < 1e-12 and fit.birge == 1.0 and fit.shared.size == 0
    eps = np.concatenate([0.5 / L, 2.0 / L])  # two families, different expansion parameters
    y = 0.25 + 0.4 * eps + np.where(np.arange(12) < 6, -0.3, 1.5) * eps**2
    fit = extrapolate(eps**2, y, np.full(12, 1e-3), groups=["a"] * 6 + ["b"] * 6, shared=eps)
    assert fit.intercept == pytest.approx(0.25, abs=1e-10) and fit.shared == pytest.approx([0.4])
    assert np.allclose(fit.coefficients["a"], [-0.3]) and np.allclose(fit.coefficients["b"], [1.5])


def test_standard_error_covers_the_truth_at_the_nominal_rate():
    """Over 2000 simulated data sets the |z| of the true intercept exceeds 1.96 in about 5% of them.

    A standard error that forgot the weights, or used the residual scatter of an exactly fitting model,
    would give a rate far from 5% (the binomial 99.9% band for 2000 draws is 3.5%-6.6%).
    """
    rng = np.random.default_rng(4)
    L = np.log(2.0 ** np.array([8, 10, 12, 14, 16, 18]))
    se = np.array([0.001, 0.0015, 0.002, 0.003, 0.005, 0.008])
    truth = 0.25 + 0.4 / L
    misses = 0
    for _ in range(2000):
        fit = extrapolate(1 / L, truth + se * rng.standard_normal(6), se)
        misses += abs(fit.z(0.25)) > 1.96
    assert 0.035 < misses / 2000 < 0.066


def test_a_missing_term_inflates_the_error_by_the_birge_ratio():
    """Data with a 1/L^2 term fitted with 1/L alone: chi2/dof >> 1 and the error grows by sqrt(chi2/dof)."""
    L = np.log(2.0 ** np.arange(8, 20, 2))
    se = np.full(6, 1e-3)
    y = 0.5 + 0.3 / L + 5.0 / L**2
    fit = extrapolate(1 / L, y, se)
    plain = extrapolate(1 / L, 0.5 + 0.3 / L, se)
    assert fit.birge == pytest.approx(np.sqrt(fit.chi2 / fit.dof)) and fit.birge > 5
    assert fit.se == pytest.approx(plain.se * fit.birge)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least 3 points"):
        extrapolate(np.ones((2, 2)), [1.0, 2.0], [0.1, 0.1])
    with pytest.raises(ValueError, match="standard errors > 0"):
        extrapolate([0.1, 0.2, 0.3], [1.0, 2.0, 3.0], [0.1, 0.0, 0.1])
    with pytest.raises(ValueError, match="one label per point"):
        extrapolate([0.1, 0.2, 0.3], [1.0, 2.0, 3.0], [0.1, 0.1, 0.1], groups=["a", "b"])
