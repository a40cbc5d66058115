"""Score families: registry, exact kappa_bar, and samplers that agree with it (theory.md §4.1)."""

import math

import numpy as np
import pytest
from scipy import stats

import critscale
from critscale import families

IID = ["gauss", "ptail1", "ptail3", "ptail0.5", "logexp", "edge", "unif", "sphere3", "sphere5", "sphere9", "pareto1",
       "pareto2"]


def test_standard_order_and_registry():
    assert families.STANDARD == ("gauss", "ptail1", "ptail3", "logexp", "edge", "unif",
                                 "sphere3", "sphere5", "sphere9", "planted", "simplex", "planted_shrink")
    for name in families.names():
        family = families.get(name)
        assert family.name == name
        assert family.domain in {"gumbel", "weibull", "step", "frechet"}
        assert isinstance(family.law_label, str) and family.law_label
    assert families.get("sphere17").params == {"d": 17}
    assert families.get("ptail2").kappa_bar(math.e**4) == pytest.approx(2 * 2.0)
    assert families.get(families.get("gauss")).name == "gauss"
    with pytest.raises(ValueError, match="unknown family"):
        families.get("cauchy")


@pytest.mark.parametrize("name", families.names())
def test_sample_shape_dtype_and_determinism(name):
    family = families.get(name)
    a = family.sample(17, 5, np.random.default_rng(0))
    b = family.sample(17, 5, np.random.default_rng(0))
    assert a.shape == (5, 17) and a.dtype == np.float64
    assert np.array_equal(a, b) and np.isfinite(a).all()
    assert family.sample(17, 0, np.random.default_rng(0)).shape == (0, 17)


def test_kappa_bar_closed_forms():
    n = np.array([2.0**10, 2.0**14, 2.0**20])
    log_n = np.log(n)
    norm = stats.norm()
    assert np.allclose(families.get("gauss").kappa_bar(n), n * norm.pdf(norm.isf(1 / n)), rtol=1e-14)
    assert np.allclose(families.get("ptail1").kappa_bar(n), 1.0)
    assert np.allclose(families.get("ptail3").kappa_bar(n), 3 * log_n ** (2 / 3), rtol=1e-14)
    assert np.allclose(families.get("ptail0.5").kappa_bar(n), 0.5 / log_n, rtol=1e-14)  # the stretched tail
    assert np.allclose(families.get("logexp").kappa_bar(n), log_n, rtol=1e-14)
    assert np.allclose(families.get("edge").kappa_bar(n), log_n**2, rtol=1e-14)
    assert np.allclose(families.get("unif").kappa_bar(n), n, rtol=1e-14)
    assert np.allclose(families.get("sphere3").kappa_bar(n), n / 2, rtol=1e-10)  # Beta(1,1): uniform on [-1, 1]
    assert np.allclose(families.get("planted").kappa_bar(n), log_n, rtol=1e-14)
    assert np.allclose(families.get("simplex").kappa_bar(n), 2 * log_n, rtol=1e-14)
    assert np.allclose(families.get("planted_shrink").kappa_bar(n), log_n**2, rtol=1e-14)
    assert np.allclose(families.get("pareto2").kappa_bar(n), 2 / np.sqrt(n), rtol=1e-14)
    # the values quoted in theory.md §5.1 (4 significant digits)
    quoted = {"gauss": (3.374, 4.075, 4.958), "ptail3": (10.91, 13.65, 17.31), "sphere5": (54.75, 221, 1773),
              "sphere9": (24.98, 52.57, 153.2)}
    for name, values in quoted.items():
        assert np.allclose(families.get(name).kappa_bar(n), values, rtol=2e-3)


@pytest.mark.parametrize("name", IID)
def test_kappa_bar_is_the_hazard_at_the_quantile(name):
    """n Fbar(u_n) = 1 and kappa_bar = -n dFbar/dx (u_n), by a central difference of the exact sf."""
    family = families.get(name)
    for n in (2.0**10, 2.0**16):
        u = family.quantile(n)
        assert n * family.sf(u) == pytest.approx(1.0, rel=1e-9)
        step = 1e-5 * family.kappa_bar(n) ** -1  # a small fraction of the scale 1/kappa_bar
        derivative = (family.sf(u - step) - family.sf(u + step)) / (2 * step)
        assert n * derivative == pytest.approx(family.kappa_bar(n), rel=1e-6)


@pytest.mark.parametrize("name", IID)
def test_sampler_agrees_with_quantile_by_simulation(name):
    """n * P(s > u_n) = 1, estimated from 2e5 draws at n = 64; tolerance 5 binomial standard errors."""
    family = families.get(name)
    n, rows = 64, 3125
    scores = family.sample(n, rows, np.random.default_rng([11, len(name)]))  # 2e5 draws
    exceed = np.mean(scores > family.quantile(n))
    sem = math.sqrt((1 / n) * (1 - 1 / n) / scores.size)
    assert abs(n * exceed - 1.0) <= 5 * n * sem
    # and the whole law: Kolmogorov-Smirnov against the exact cdf 1 - sf
    result = stats.kstest(scores[:200].ravel(), lambda x: 1.0 - family.sf(x))
    assert result.pvalue > 1e-4


@pytest.mark.parametrize("name", ["planted", "simplex", "planted_shrink"])
def test_planted_rows_have_their_gap(name):
    family = families.get(name)
    n = 256
    scores = family.sample(n, 50, np.random.default_rng(5))
    gaps = critscale.sorted_gaps(scores)
    assert np.all(np.argmax(scores, axis=-1) == 0)
    if name == "planted":
        g, low, high = 1.0, 1.0, 2.0  # g = 1, bulk on [-1, 0]
    elif name == "simplex":
        g, low, high = 0.5, 0.45, 0.55  # 1 - rho, -+ eta
    else:
        g = 1 / math.log(n)
        low, high = g, g + 1.0
    assert np.all(gaps[:, 1:] >= low) and np.all(gaps[:, 1:] <= high)
    assert family.kappa_bar(n) == pytest.approx(math.log(n) / g, rel=1e-14)


def test_exact_simplex_kappa_equals_kappa_bar():
    """Without noise every competitor sits at gap 1 - rho, so kappa = log n/(1 - rho) exactly (Theorem 8)."""
    family = families.simplex(rho=0.5, eta=0.0)
    scores = family.sample(1000, 3, np.random.default_rng(0))
    assert np.allclose(critscale.accumulation_scale(scores), family.kappa_bar(1000), rtol=1e-15)


def test_planted_shrink_needs_two_entries():
    with pytest.raises(ValueError):
        families.get("planted_shrink").sample(1, 2, np.random.default_rng(0))


def test_law_is_the_leading_order_of_kappa_bar():
    # Weibull: alpha (C n)^{1/alpha} is exact up to O(n^{-1/alpha}) relative corrections
    for d in (3, 5, 9):
        family = families.get(f"sphere{d}")
        assert family.law(1e12) == pytest.approx(family.kappa_bar(1e12), rel=1e-3)
    # Gumbel: the laws of the table, exactly as written
    assert families.get("gauss").law(1e6) == pytest.approx(math.sqrt(2 * math.log(1e6)))
    assert families.get("gauss").law(1e300) / families.get("gauss").kappa_bar(1e300) == pytest.approx(1, rel=0.01)
    assert families.get("ptail3").law(1e6) == pytest.approx(families.get("ptail3").kappa_bar(1e6))


def test_bad_family_arguments():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="n must be"):
        families.get("gauss").sample(0, 3, rng)
    with pytest.raises(ValueError, match="rows must be"):
        families.get("gauss").sample(3, -1, rng)
    with pytest.raises(ValueError, match="rng must be"):
        families.get("gauss").sample(3, 1, 42)
    with pytest.raises(ValueError, match="n must be"):
        families.get("gauss").kappa_bar(0.5)
    with pytest.raises(ValueError, match="not an i.i.d. family"):
        families.get("planted").sf(0.0)
    with pytest.raises(ValueError, match="rho"):
        families.simplex(rho=0.99, eta=0.05)


def test_family_rows_follows_the_seed_convention():
    """family_rows(name, n, rows, seed) is the notebooks' default_rng([seed, STANDARD.index(name), n]) draw, bit for bit.

    A wrong stream index (e.g. the position in names()), or seed and n swapped, draws different rows.
    """
    for name in families.STANDARD:
        for n, rows, seed in ((64, 3, 12697), (1000, 2, 8)):
            expected = families.get(name).sample(n, rows, np.random.default_rng([seed, families.STANDARD.index(name), n]))
            assert np.array_equal(families.family_rows(name, n, rows, seed), expected)
    swapped = families.get("gauss").sample(64, 3, np.random.default_rng([64, 0, 12697]))
    assert not np.array_equal(families.family_rows("gauss", 64, 3, 12697), swapped)
    # a sequence seed is flattened in front; families outside STANDARD need their own stream (chapter 11 uses d)
    assert np.array_equal(families.family_rows("gauss", 32, 2, [1, 2]),
                          families.get("gauss").sample(32, 2, np.random.default_rng([1, 2, 0, 32])))
    assert np.array_equal(families.family_rows("sphere16", 32, 2, 5, stream=16),
                          families.get("sphere16").sample(32, 2, np.random.default_rng([5, 16, 32])))
    with pytest.raises(ValueError, match="stream"):
        families.family_rows("sphere16", 32, 2, 5)
    with pytest.raises(ValueError, match="rows must be"):
        families.family_rows("gauss", 32, -1, 5)


def test_family_fields_are_public():
    """Family is built from keywords without leading underscores (issue 13)."""
    import dataclasses

    names = [f.name for f in dataclasses.fields(families.Family)]
    assert not [name for name in names if name.startswith("_")]
    custom = families.Family(name="const", domain="step", law_label="1",
                             sampler=lambda rng, n, rows: np.zeros((rows, n)),
                             kappa_bar_formula=np.ones_like, law_formula=np.ones_like)
    assert custom.sample(3, 2, np.random.default_rng(0)).shape == (2, 3) and custom.kappa_bar(10.0) == 1.0
    assert not custom.iid


@pytest.mark.parametrize("name", ["gauss", "ptail1", "ptail3", "ptail0.5", "ptail0.25", "ptail1.5", "logexp", "edge"])
def test_hazard_flag_matches_the_hazard_along_the_top(name):
    """hazard_nondecreasing (the hypothesis of Theorem 6 items 2 and 4) says whether h = f / Fbar is nondecreasing
    over the upper range; kappa_bar(n) = h(u_n) with u_n increasing in n, so the flag must equal whether kappa_bar
    is nondecreasing in n over n = 2^4 .. 2^60.  A flag set from the domain alone (every Gumbel family True) fails
    for the stretched tails ptail0.5 and ptail0.25, whose kappa_bar falls like (log n)^(1 - 1/p)."""
    family = families.get(name)
    n = 2.0 ** np.arange(4, 61)
    kb = np.asarray(family.kappa_bar(n))
    nondecreasing = bool(np.all(np.diff(kb) >= -1e-12 * kb[1:]))
    assert family.hazard_nondecreasing is nondecreasing
    assert family.hazard_nondecreasing is (family.params.get("p", 1.0) >= 1)


def test_hazard_flag_only_for_the_gumbel_class():
    for name in families.names():
        family = families.get(name)
        assert (family.hazard_nondecreasing is None) is (family.domain != "gumbel"), name
