"""Every documented bad input raises ValueError naming the problem; nothing is silently clipped."""

import math

import numpy as np
import pytest

import critscale
from checks import peak_bytes

ROW = np.array([0.0, -1.0, -2.5])

# (callable of the scores, a name for the test id)
SCORE_FUNCTIONS = [
    (lambda s: critscale.sorted_gaps(s), "sorted_gaps"),
    (lambda s: critscale.gap_counts(s, [0.0, 1.0]), "gap_counts"),
    (lambda s: critscale.accumulation_scale(s), "accumulation_scale"),
    (lambda s: critscale.legendre_transform(s, [0.0, 1.0]), "legendre_transform"),
    (lambda s: critscale.softmax_stats(s, [0.0, 1.0]), "softmax_stats"),
    (lambda s: critscale.beta_at_max_weight(s, 0.5), "beta_at_max_weight"),
    (lambda s: critscale.beta_at_entropy(s, 0.5), "beta_at_entropy"),
]


@pytest.mark.parametrize("function", [f for f, _ in SCORE_FUNCTIONS], ids=[i for _, i in SCORE_FUNCTIONS])
@pytest.mark.parametrize("bad,message", [
    (np.array([0.0, np.nan, 1.0]), "NaN"),
    (np.array([0.0, np.inf, 1.0]), r"\+inf"),
    (np.array([[0.0, 1.0], [-np.inf, -np.inf]]), r"rows empty after masking.*\[1\]"),
    (np.zeros((2, 0)), "length 0"),
    (np.float64(3.0), "at least one dimension"),
    (np.array([1e308, -1e308]), "overflows"),
    (np.array([1e308, -np.inf, -1e308]), "overflows"),  # the range over the valid entries of a masked row
    (np.array(["a", "b"]), "numeric"),
    (np.array([1 + 1j, 2.0]), "real"),
])
def test_bad_scores(function, bad, message):
    with pytest.raises(ValueError, match=message):
        function(bad)


@pytest.mark.parametrize("function", [critscale.softmax_stats, critscale.legendre_transform])
@pytest.mark.parametrize("beta,message", [
    (-0.5, ">= 0"),
    ([1.0, -1e-300], ">= 0"),
    (np.nan, "finite"),
    (np.inf, "finite"),
    ([[1.0, 2.0]], "1-D"),
])
def test_bad_beta(function, beta, message):
    with pytest.raises(ValueError, match=message):
        function(ROW, beta)


@pytest.mark.parametrize("K,message", [(1, "K must be >= 2"), (0, "K must be >= 2"), (-3, "K must be >= 2"),
                                       (2.5, "integer"), ("2", "integer"), (True, "integer")])
def test_bad_K(K, message):
    with pytest.raises(ValueError, match=message):
        critscale.accumulation_scale(ROW, K=K)


@pytest.mark.parametrize("t,message", [
    ([1.0, 0.5], "sorted"),
    ([-0.1, 1.0], ">= 0"),
    ([0.0, np.nan], "NaN"),
    ([[0.0, 1.0]], "1-D"),
])
def test_bad_thresholds(t, message):
    with pytest.raises(ValueError, match=message):
        critscale.gap_counts(ROW, t)


def test_bad_root_targets_and_shapes():
    scores = np.zeros((2, 3)) + np.array([0.0, -1.0, -2.0])
    with pytest.raises(ValueError, match="p must be in"):
        critscale.beta_at_max_weight(scores, 0.0)
    with pytest.raises(ValueError, match="p must be in"):
        critscale.beta_at_max_weight(scores, 1.5)
    with pytest.raises(ValueError, match="h must be finite"):
        critscale.beta_at_entropy(scores, -0.1)
    with pytest.raises(ValueError, match="h must be finite"):
        critscale.beta_at_entropy(scores, np.nan)
    with pytest.raises(ValueError, match="does not match the batch shape"):
        critscale.beta_at_max_weight(scores, [0.5, 0.6, 0.7])


def test_masked_entries_are_not_errors_and_not_clipped():
    row = np.array([-np.inf, 0.0, -1.0, -np.inf])
    assert critscale.gap_counts(row, np.inf) == 2  # masked entries are never counted
    assert critscale.accumulation_scale(row) == pytest.approx(math.log(2))
    huge = np.array([0.0, -1e300])
    assert critscale.softmax_stats(huge, 1e10).log_z == 0.0  # underflow to exactly 0, not an error


@pytest.mark.parametrize("function", [f for f, _ in SCORE_FUNCTIONS], ids=[i for _, i in SCORE_FUNCTIONS])
def test_a_masked_arrays_mask_is_honoured_as_minus_inf(function):
    """Masked entries of a numpy masked array are masked scores: the result is that of the -inf row."""
    data = np.array([[5.0, 0.0, -1.0, 7.0], [0.3, -0.2, 0.1, -0.9]])
    mask = np.array([[True, False, False, True], [False, False, False, False]])
    honoured = function(np.ma.masked_array(data, mask))
    expected = function(np.where(mask, -np.inf, data))
    as_list = lambda result: list(result) if isinstance(result, tuple) else [result]  # noqa: E731
    for got, want in zip(as_list(honoured), as_list(expected), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_accumulation_scale_of_a_masked_row_is_log_2():
    row = np.ma.masked_array([9.0, 0.0, -1.0, 9.0], mask=[True, False, False, True])
    assert critscale.accumulation_scale(row) == pytest.approx(math.log(2))


def test_a_masked_array_for_another_argument_is_refused():
    beta = np.ma.masked_array([0.5, 1.0], mask=[False, True])
    with pytest.raises(ValueError, match="beta is a masked array with 1 masked entries"):
        critscale.softmax_stats(ROW, beta)
    with pytest.raises(ValueError, match="t is a masked array"):
        critscale.gap_counts(ROW, np.ma.masked_array([0.5, 1.0], mask=[True, False]))
    unmasked = critscale.softmax_stats(ROW, np.ma.masked_array([0.5, 1.0], mask=[False, False]))
    np.testing.assert_allclose(unmasked.log_z, critscale.softmax_stats(ROW, [0.5, 1.0]).log_z, rtol=1e-12)


def test_torch_bad_input():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="NaN"):
        critscale.softmax_stats(torch.tensor([0.0, float("nan")]), 1.0)
    with pytest.raises(ValueError, match=">= 0"):
        critscale.softmax_stats(torch.tensor([0.0, 1.0]), torch.tensor([-1.0]))


# ---------------------------------------------------------------- messages that name the problem (issue 14, item 11)

def test_ragged_rows_are_named_as_ragged():
    """A ragged nested list is reported as ragged, not with numpy's 'setting an array element with a sequence'."""
    for function, _ in SCORE_FUNCTIONS:
        with pytest.raises(ValueError, match="ragged") as caught:
            function([[0.0, -1.0], [0.0]])
        assert "setting an array element" not in str(caught.value)


def test_non_integer_length_is_named_not_the_seed():
    """n = 1024.7 (e.g. from a params file) must say 'n must be an integer', not that the seed is wrong."""
    from critscale import families, montecarlo

    for call in (lambda: families.family_rows("gauss", 1024.7, 4, seed=12697),
                 lambda: montecarlo.run("gauss", 1024.7, 4, lambda s: {"m": s.max(axis=-1)}, seed=1),
                 lambda: families.get("gauss").sample(1024.7, 4, np.random.default_rng(0))):
        with pytest.raises(ValueError, match="n must be an integer") as caught:
            call()
        assert "seed" not in str(caught.value).lower()


def test_ssmax_with_a_list_of_s_names_s():
    with pytest.raises(ValueError, match="s must be a single number"):
        critscale.rules.ssmax(10, s=[0.4, 0.5])
    with pytest.raises(ValueError, match="s must be"):
        critscale.rules.ssmax(10, s="0.4")


@pytest.mark.parametrize("d", [math.inf, -math.inf, math.nan, 2.5, "5", True])
def test_sphere_with_a_bad_dimension_is_a_value_error(d):
    """families.sphere(inf) raised OverflowError from int(inf); every bad d is one ValueError naming d."""
    with pytest.raises(ValueError, match="d must be an integer >= 2"):
        critscale.families.sphere(d)


@pytest.mark.parametrize("bad", ["10", True, np.bool_(True), [True, False], b"10"])
def test_rules_refuse_strings_and_booleans(bad):
    """rules.* accepted n = "10" (converted to 10.0) and n = True (1.0); both are refused, naming n."""
    rules = critscale.rules
    for rule in (rules.sqrt_2_log_n, rules.ssmax, rules.log_n_squared, rules.yarn, rules.entropy_invariant,
                 *rules.RULES.values()):
        with pytest.raises(ValueError, match="n must be a real number"):
            rule(bad)
    with pytest.raises(ValueError, match="n_train must be a real number"):
        rules.yarn(100, n_train=bad)


@pytest.mark.parametrize("call,message", [
    (lambda: critscale.families.ptail("3"), "p must be a real number"),
    (lambda: critscale.families.ptail([2.0, 3.0]), "p must be a single number"),
    (lambda: critscale.families.planted(g=0.0), "g must be finite and > 0"),
    (lambda: critscale.families.edge(q=math.inf), "q must be finite and > 0"),
    (lambda: critscale.families.get("gauss").kappa_bar(True), "n must be a real number"),
    (lambda: critscale.families.get("gauss").kappa_bar("1000"), "n must be a real number"),
    (lambda: critscale.limits.pd_entropy(True), "c must be a real number"),
    (lambda: critscale.limits.poisson_arrivals(2.5, 3, np.random.default_rng(0)), "k must be an integer"),
    (lambda: critscale.montecarlo.run("gauss", 8, 2, lambda s: {"m": s.max(axis=-1)}, seed=[1, True]), "seed"),
    (lambda: critscale.montecarlo.run("gauss", 8, 2, lambda s: {"m": s.max(axis=-1)}, seed=[]), "seed"),
])
def test_parameters_are_validated_by_one_helper(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def stepwise_extremes(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row maxima and minima over the finite entries, one whole-array step at a time."""
    return flat.max(axis=-1), np.where(np.isfinite(flat), flat, np.inf).min(axis=-1)


@pytest.mark.parametrize("cache", [2**16, 64])
def test_one_scan_finds_the_stepwise_extremes(monkeypatch, cache):
    """The blocked scan's maxima and masked minima equal those of whole-array steps (max and min are exact), also
    when a block of 64 values holds a piece of a row that is all -inf or that ends a row."""
    monkeypatch.setattr(critscale._validate, "CACHE_ELEMENTS", cache)
    rng = np.random.default_rng(8)
    flat = rng.standard_normal((9, 301))
    flat[rng.random(flat.shape) < 0.3] = -np.inf
    flat[2, 64:200] = -np.inf  # whole pieces masked
    flat[5, :300] = -np.inf  # one valid entry, at the end
    flat[7] = -7.0  # constant row
    top, low = critscale._validate._row_extremes(flat)
    want_top, want_low = stepwise_extremes(flat)
    assert np.array_equal(top, want_top) and np.array_equal(low, want_low)


def test_bad_entries_are_named_as_before_across_blocks(monkeypatch):
    """With blocks of a few values the one scan (and accumulation_scale's check of its sorted rows) still names
    the first NaN of the whole array, even when a +inf comes first in an earlier block, and every row whose
    range overflows; the stepwise checks named the same."""
    monkeypatch.setattr(critscale._validate, "CACHE_ELEMENTS", 8)
    monkeypatch.setattr(critscale._validate, "MAX_ELEMENTS", 64)
    scores = np.zeros((4, 40))
    scores[0, 5] = np.inf
    scores[3, 17] = np.nan
    wide = np.zeros((12, 40))
    wide[[1, 4, 11], 0] = 1e308
    wide[[1, 4, 11], 39] = -1e308
    wide[4, 1:39] = -np.inf
    for function, _ in SCORE_FUNCTIONS:
        with pytest.raises(ValueError, match=r"contain NaN \(first at index \(3, 17\)\)"):
            function(scores)
        with pytest.raises(ValueError, match=r"range max - min of rows \[1, 4, 11\] overflows"):
            function(wide)


def test_validation_allocates_blocks_not_arrays():
    """The stepwise checks allocated whole-array masks and a float64 copy (np.where) of the scores; the one scan
    holds a block.  accumulation_scale holds only the sorted copy that np.sort makes (the old route also held the
    gaps and the ratios)."""
    scores = np.random.default_rng(2).standard_normal((256, 4096))  # 8 MiB
    scores[::2, ::3] = -np.inf

    assert peak_bytes(lambda: critscale._validate.as_scores(scores)) < 2**20
    assert peak_bytes(lambda: stepwise_extremes(scores)) > scores.nbytes  # what the test would catch
    assert peak_bytes(lambda: critscale.accumulation_scale(scores)) < 1.2 * scores.nbytes
