"""Limit laws (Theorems 6-7, theory.md §4.2) and the rescaling rules of the literature (theory.md §2)."""

import math

import numpy as np
import pytest
from scipy import special, stats

import critscale
from critscale import limits, montecarlo, rules


def test_poisson_dirichlet_closed_forms():
    c = np.array([0.5, 1.0, 2.0, 4.0, 8.0, np.inf])
    assert np.allclose(limits.pd_collision(c), [0, 0, 0.5, 0.75, 0.875, 1.0])
    entropy = limits.pd_entropy(c)
    assert np.all(np.isinf(entropy[:2]))
    assert entropy[2] == pytest.approx(2 * math.log(2), rel=1e-14)  # psi(1) - psi(1/2) = 2 log 2
    assert np.allclose(entropy[3:5], [0.51, 0.23], atol=6e-3)  # theory.md §5.2 table
    assert entropy[5] == 0.0
    assert limits.pd_collision(3.0) == pytest.approx(2 / 3)
    # E H = 1 at c = 2.44 (theory.md §5.4)
    assert limits.pd_entropy(2.44) == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("c", [2.0, 4.0])
def test_gumbel_limit_simulation_matches_poisson_dirichlet(c):
    k_max, size = 5000, 1000
    result = limits.poisson_limit_stats(c, "gumbel", k_max=k_max, size=size, rng=np.random.default_rng(7))
    # truncation: the neglected weight is about E[Gamma_1^c] k_max^(1-c)/(c-1) = Gamma(c+1) k_max^(1-c)/(c-1)
    truncation = special.gamma(c + 1) * k_max ** (1 - c) / (c - 1)
    assert abs(result.collision[0] - limits.pd_collision(c)) <= 5 * result.collision_sem[0] + 2 * truncation
    assert abs(result.entropy[0] - limits.pd_entropy(c)) <= 5 * result.entropy_sem[0] + 10 * truncation


def test_limit_gap_laws():
    rng = np.random.default_rng(3)
    gumbel = limits.gumbel_gaps(6, 4000, rng)
    assert gumbel.shape == (4000, 6) and np.all(gumbel[:, 0] == 0) and np.all(np.diff(gumbel, axis=-1) >= 0)
    # Gamma_1/Gamma_2 is uniform on (0, 1), so exp(-xi_2) is uniform
    assert stats.kstest(np.exp(-gumbel[:, 1]), "uniform").pvalue > 1e-4
    weibull = limits.weibull_gaps(1.0, 6, 4000, rng)
    assert stats.kstest(weibull[:, 1], "expon").pvalue > 1e-4  # Gamma_2 - Gamma_1 ~ Exp(1)
    alpha = limits.weibull_gaps(2.0, 3, 5, np.random.default_rng(1))
    gamma = limits.poisson_arrivals(3, 5, np.random.default_rng(1))
    assert np.allclose(alpha, 2 * (np.sqrt(gamma) - np.sqrt(gamma[:, :1])), rtol=1e-15)


@pytest.mark.parametrize("domain,K", [("gumbel", 2), ("gumbel", 16), (2.0, 4)])
def test_kappa_limit_samples_against_loop(domain, K):
    size, k_max = 40, 300
    samples = limits.kappa_limit_samples(size, k_max, np.random.default_rng(9), K=K, domain=domain)
    gaps = limits.limit_gaps(domain, k_max, size, np.random.default_rng(9))
    for sample, row in zip(samples, gaps):
        expected = max(math.log(k) / row[k - 1] for k in range(K, k_max + 1))
        assert sample == pytest.approx(expected, rel=1e-14)


def test_kappa_limit_samples_do_not_depend_on_blocking(monkeypatch):
    """Blocks take consecutive rows of one stream, so the samples equal those of one big draw."""
    reference = limits.kappa_limit_samples(50, 200, np.random.default_rng(4), K=16)
    monkeypatch.setattr(critscale._validate, "MAX_ELEMENTS", 3 * 200 * 7)  # blocks of 7 processes
    blocked = limits.kappa_limit_samples(50, 200, np.random.default_rng(4), K=16)
    assert np.array_equal(reference, blocked)


def test_weibull_limit_matches_uniform_rows():
    """Theorem 7 with alpha = 1: uniform rows at beta = c n match the Poisson limit (5 combined stderr)."""
    c = np.array([0.5, 2.0])
    limit = limits.poisson_limit_stats(c, 1.0, k_max=400, size=2000, rng=np.random.default_rng(2))
    n = 4096
    run = montecarlo.run("unif", n, 1000, lambda s: {"collision": critscale.softmax_stats(s, c * n).collision},
                         seed=[3])
    combined = np.sqrt(limit.collision_sem**2 + run["collision"].sem ** 2)
    assert np.all(np.abs(limit.collision - run["collision"].mean) <= 5 * combined)


def test_limit_argument_checks():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="c must be > 0"):
        limits.pd_collision(-1.0)
    with pytest.raises(ValueError, match="domain"):
        limits.limit_gaps("frechet", 3, 2, rng)
    with pytest.raises(ValueError, match="alpha"):
        limits.weibull_gaps(0.0, 3, 2, rng)
    with pytest.raises(ValueError, match="K must be >= 2"):
        limits.kappa_limit_samples(3, 10, rng, K=1)
    with pytest.raises(ValueError, match="k_max must be >= K"):
        limits.kappa_limit_samples(3, 10, rng, K=16)


def test_rules_values():
    n = np.array([math.e**2, math.e**8])
    assert np.allclose(rules.sqrt_2_log_n(n), [2.0, 4.0])
    assert np.allclose(rules.ssmax(n), [0.86, 3.44])
    assert np.allclose(rules.ssmax(n, s=1.0), [2.0, 8.0])
    assert np.allclose(rules.log_n_squared(n), [4.0, 64.0])
    assert rules.yarn(4096 * math.e**10, 4096) == pytest.approx(4.0)  # (0.1 * 10 + 1)^2
    assert rules.yarn(1000, 4096) == 1.0  # no extension, factor 1
    assert rules.entropy_invariant(4096**2, 4096) == pytest.approx(2.0)
    assert rules.entropy_invariant(64, 4096) == pytest.approx(0.5)
    assert set(rules.RULES) == set(rules.RULE_LABELS) == set(rules.CITATIONS)
    for name, rule in rules.RULES.items():
        assert np.all(np.isfinite(rule(np.array([2.0**10, 2.0**20])))), name
    assert rules.RULES["yarn"](4096 * math.e) == pytest.approx(1.1**2)


def test_rules_audit_numbers_of_theory():
    """theory.md §4.1: on planted rows sqrt(2 log n)/kappa_bar drifts by 0.58x and (log n)^2 by 3x
    from n = 2^10 to 2^30, and YaRN over-concentrates Gaussian rows by about 2.8x."""
    planted = critscale.families.get("planted")
    gauss = critscale.families.get("gauss")
    lo, hi = 2.0**10, 2.0**30

    def drift(rule, family):
        return rules.drift(rule, family, hi, lo)

    assert drift(rules.sqrt_2_log_n, planted) == pytest.approx(0.58, abs=0.005)
    assert drift(rules.log_n_squared, planted) == pytest.approx(3.0, abs=0.005)
    assert drift(lambda m: math.log(m), planted) == pytest.approx(1.0, rel=1e-14)
    assert drift(rules.RULES["yarn"], gauss) == pytest.approx(2.8, abs=0.05)
    # the inverse ratio (n_ref over n), a plausible slip, gives 1/0.58 and 1/3
    assert rules.drift(rules.sqrt_2_log_n, planted, lo, hi) == pytest.approx(1 / 0.58, abs=0.02)
    # chapter 10's relative_ratio and drift, bit for bit
    n_grid = 2.0 ** np.arange(8, 30.25, 0.25)
    fam = critscale.families.get("gauss")
    at = lambda m: np.asarray(rules.log_n_squared(m), dtype=float) / fam.kappa_bar(m)  # noqa: E731
    assert np.array_equal(rules.drift(rules.log_n_squared, "gauss", n_grid, 4096), at(n_grid) / at(4096.0))
    chapter = float((rules.ssmax(hi) / planted.kappa_bar(hi)) / (rules.ssmax(lo) / planted.kappa_bar(lo)))
    assert rules.drift(rules.ssmax, planted, hi, lo) == chapter


def test_rules_reject_bad_n():
    with pytest.raises(ValueError, match="n must be"):
        rules.sqrt_2_log_n(0.5)
    with pytest.raises(ValueError, match="n must be"):
        rules.log_n_squared(np.nan)
    with pytest.raises(ValueError, match="n_train must be > 1"):
        rules.entropy_invariant(10, 1)
    with pytest.raises(ValueError, match="s must be"):
        rules.ssmax(10, s=-1)


def test_loglog_exponent_of_known_laws():
    """d log f / d log log n is a for (log n)^a (1e-7; a log n derivative instead would give a/log n)."""
    for n in (2.0**10, 2.0**40):
        assert rules.loglog_exponent(rules.sqrt_2_log_n, n) == pytest.approx(0.5, abs=1e-7)
        assert rules.loglog_exponent(rules.log_n_squared, n) == pytest.approx(2.0, abs=1e-7)
        assert rules.loglog_exponent(lambda m: np.log(m) ** 1.5, n) == pytest.approx(1.5, abs=1e-7)
    # YaRN tends to (log n)^2: its effective exponent approaches 2 from below
    assert 1.5 < rules.loglog_exponent(rules.RULES["yarn"], 2.0**30) < 2.0
    gauss = critscale.families.get("gauss")
    assert rules.loglog_exponent(gauss.kappa_bar, 2.0**30) == pytest.approx(0.5, abs=0.1)
    # chapter 10's inline central difference, bit for bit
    h, n = 1e-4, 2.0**30
    loglog = np.log(np.log(n))
    up, down = np.exp(np.exp(loglog + h)), np.exp(np.exp(loglog - h))
    law = critscale.families.get("edge").kappa_bar
    assert rules.loglog_exponent(law, n) == float((np.log(law(up)) - np.log(law(down))) / (2 * h))
    with pytest.raises(ValueError, match="n must be finite and > 1"):
        rules.loglog_exponent(rules.sqrt_2_log_n, 1.0)  # log log n needs n > 1


def test_su_mean_field_entropy_on_step_rows():
    """Su's formula on the step row (g, 0, ..., 0) is Lambda(beta) + beta g/n exactly (chapter 10, item 1);
    with the mean over the bulk only (excluding the top), or n - 1 for n, it would not be.  It also equals
    chapter 10's inline expression bit for bit, and masked entries are left out."""
    for n in (2**6, 2**12):
        row = np.zeros((1, n))
        row[0, 0] = 1.0
        beta = np.array([0.1, 0.5, 0.9]) * np.log(n)
        su = rules.su_mean_field_entropy(row, beta)[0]
        legendre = critscale.legendre_transform(row, beta)[0]
        assert np.allclose(su - legendre, beta / n, rtol=1e-9, atol=0)
        gap = row.max(axis=-1) - row.mean(axis=-1)
        assert np.array_equal(su, (np.log(n) - beta[None, :] * gap[:, None])[0])
    rng = np.random.default_rng(3)
    scores = rng.standard_normal((5, 40))
    beta = np.array([0.5, 2.0])
    assert np.array_equal(rules.su_mean_field_entropy(scores, beta),
                          np.log(40) - beta[None, :] * (scores.max(-1) - scores.mean(-1))[:, None])
    masked = np.array([1.0, 0.0, -np.inf, 0.0])
    assert rules.su_mean_field_entropy(masked, 1.0) == pytest.approx(math.log(3) - (1.0 - 1.0 / 3))


def test_coupled_limit_scores():
    """The limit points built from a row (Theorems 6-7, item 1): exact where the row is its own limit, and the
    right law elsewhere.

    Exponential rows (ptail1) are their own Gumbel limit and uniform rows their own alpha = 1 limit, so the
    coupled gaps equal the row's rescaled gaps to rounding.  For Gaussian and sphere5 rows the ratio
    Gamma_1/Gamma_3 read back from the coupled scores must be Beta(1, 2) (KS test; the same read-back
    without the logarithm gives exp(-Gamma(2)) and fails), and the coupled top must be the row's top (a
    transform by F instead of the survival function picks the bottom of the row and fails).
    """
    rng = np.random.default_rng(11)
    ptail1 = critscale.families.get("ptail1").sample(500, 4, rng)
    gaps = lambda s: s.max(axis=-1, keepdims=True) - s  # noqa: E731
    assert np.allclose(gaps(limits.coupled_limit_scores("ptail1", ptail1)), gaps(ptail1), rtol=0, atol=1e-12)
    unif = critscale.families.get("unif").sample(500, 4, rng)
    assert np.allclose(gaps(limits.coupled_limit_scores("unif", unif)), 500 * gaps(unif), rtol=0, atol=1e-9)

    gauss = critscale.families.get("gauss").sample(64, 4000, rng)
    ratio_13 = stats.beta(1, 2).cdf  # law of Gamma_1/Gamma_3
    top3 = np.sort(limits.coupled_limit_scores("gauss", gauss), axis=-1)[:, -3:]  # -log Gamma'_3, _2, _1
    assert stats.kstest(np.exp(top3[:, 0] - top3[:, 2]), ratio_13).pvalue > 1e-4
    no_log = np.sort(-64 * stats.norm.sf(gauss), axis=-1)[:, -3:]
    assert stats.kstest(np.exp(no_log[:, 0] - no_log[:, 2]), ratio_13).pvalue < 1e-4
    top = np.argmax(gauss, axis=-1)
    assert np.array_equal(np.argmax(limits.coupled_limit_scores("gauss", gauss), axis=-1), top)
    assert not np.array_equal(np.argmax(-np.log(64 * stats.norm.cdf(gauss)), axis=-1), top)

    sphere = critscale.families.get("sphere5").sample(64, 4000, rng)
    coupled = limits.coupled_limit_scores("sphere5", sphere)  # -2 Gamma'^(1/2)
    arrivals = (np.sort(coupled, axis=-1)[:, -3:] / -2.0) ** 2  # (rows, 3): Gamma'_3, Gamma'_2, Gamma'_1
    assert stats.kstest(arrivals[:, 2] / arrivals[:, 0], ratio_13).pvalue > 1e-4
    assert np.allclose(limits.coupled_limit_scores("sphere5", sphere, domain="gumbel"),
                       -np.log(64 * critscale.families.get("sphere5").sf(sphere)), rtol=1e-15)
    with pytest.raises(ValueError, match="not an i.i.d. family"):
        limits.coupled_limit_scores("planted", np.zeros((1, 4)))
    with pytest.raises(ValueError, match="domain"):
        limits.coupled_limit_scores("gauss", gauss[:1], domain="frechet")


def test_window_summaries():
    """The window chapters' statistic: its summaries are softmax_stats at c kappa_bar_n (a statistic at
    beta = c, or at c kappa_bar_n of another n, fails), and its corrections D_n vanish to rounding for
    uniform rows, their own alpha = 1 limit, while Gaussian rows keep a correction of order 1/log n (a
    statistic that compared the row with itself would give 0 there too)."""
    rng = np.random.default_rng(5)
    c_values, c_check = np.array([0.5, 1.0, 2.0, 4.0]), np.array([1.0, 4.0])
    unif = critscale.families.get("unif").sample(256, 50, rng)  # (50, 256)
    out = limits.window_summaries("unif", 256, c_values, c_check)(unif)
    direct = critscale.softmax_stats(unif, c_values * critscale.families.get("unif").kappa_bar(256))
    assert np.array_equal(out["collision"], direct.collision) and np.array_equal(out["entropy"], direct.entropy)
    assert out["d_collision"].shape == (50, 2)
    assert np.abs(out["d_collision"]).max() < 1e-12 and np.abs(out["d_entropy"]).max() < 1e-9
    gauss = critscale.families.get("gauss").sample(256, 200, rng)
    d = limits.window_summaries("gauss", 256, c_values, c_check)(gauss)["d_collision"][:, 0]  # (200,) at c = 1
    assert abs(d.mean()) > 5 * d.std(ddof=1) / np.sqrt(len(d))
    assert set(limits.window_summaries("gauss", 256, c_values)(gauss)) == {"collision", "entropy"}
    with pytest.raises(ValueError, match="subset"):
        limits.window_summaries("gauss", 256, c_values, [3.0])


def test_expansion_parameter():
    """eps_n = d log kappa_bar_n / d log n: the closed forms of the Gumbel families (a slope in n, or a
    one-sided difference, misses them by far more than the 1e-7 allowed)."""
    n = np.array([2.0**8, 2.0**14, 2.0**20])
    L = np.log(n)
    assert np.allclose(limits.expansion_parameter("ptail3", n), (2 / 3) / L, rtol=1e-7)
    assert np.allclose(limits.expansion_parameter("logexp", n), 1 / L, rtol=1e-7)
    assert np.allclose(limits.expansion_parameter("edge", n), 2 / L, rtol=1e-7)
    assert np.allclose(limits.expansion_parameter("ptail1", n), 0.0, atol=1e-12)
    gauss = limits.expansion_parameter("gauss", n) * 2 * L
    assert np.all((gauss > 1) & (gauss < 1.2)) and np.all(np.diff(gauss) < 0)  # 1/(2L) (1 + O(log L / L))
    assert isinstance(limits.expansion_parameter("edge", 1024), float)
