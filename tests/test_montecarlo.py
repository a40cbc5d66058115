"""The seeded, chunked Monte-Carlo runner: determinism, bounded chunks, standard errors (theory.md §5)."""

import numpy as np
import pytest

import critscale
from critscale import families, montecarlo


def row_summary(scores: np.ndarray) -> dict:
    return {
        "max": scores.max(axis=-1),
        "collision": critscale.softmax_stats(scores, [1.0, 4.0]).collision,
    }


def test_results_do_not_depend_on_max_bytes():
    n, rows = 100, 1500  # 655 rows per block, so 3 blocks
    reference = montecarlo.run("gauss", n, rows, row_summary, seed=[1, 2])
    for max_bytes in (8, 800 * 100, 655 * 100 * 8, 2 * 655 * 100 * 8, 2**30):
        other = montecarlo.run("gauss", n, rows, row_summary, seed=[1, 2], max_bytes=max_bytes)
        for key in reference.keys():
            assert np.array_equal(reference[key].values, other[key].values)


def test_chunks_stay_within_max_bytes():
    seen = []

    def record_size(scores):
        seen.append(scores.nbytes)
        return {"max": scores.max(axis=-1)}

    per_block = montecarlo.block_rows(64) * 64 * 8
    montecarlo.run("unif", 64, 5000, record_size, seed=3, max_bytes=3 * per_block)
    assert max(seen) <= 3 * per_block and len(seen) >= 2


def test_prefix_rows_and_seeds():
    long = montecarlo.run("unif", 50, 3000, row_summary, seed=[4])
    short = montecarlo.run("unif", 50, 1000, row_summary, seed=[4])
    assert np.array_equal(long["max"].values[:1000], short["max"].values)
    other = montecarlo.run("unif", 50, 1000, row_summary, seed=[5])
    assert not np.array_equal(other["max"].values, short["max"].values)
    # block b is drawn with default_rng([*seed, b])
    first = families.get("unif").sample(50, montecarlo.block_rows(50), np.random.default_rng([4, 0]))
    assert np.array_equal(short["max"].values, first.max(axis=-1)[:1000])  # the 1000 rows are a block prefix


def test_mean_and_standard_error():
    result = montecarlo.run("unif", 20, 4000, row_summary, seed=7)
    values = result["max"].values
    assert result.rows == 4000 and result.n == 20 and result.seed == (7,) and result.family == "unif"
    assert result["max"].mean == pytest.approx(values.mean(), rel=1e-15)
    assert result["max"].sem == pytest.approx(np.std(values, ddof=1) / np.sqrt(4000), rel=1e-12)
    assert result.collision.mean.shape == (2,) and result.collision.values.shape == (4000, 2)
    # E max of n uniforms = n/(n+1): within 5 standard errors
    assert abs(result["max"].mean - 20 / 21) <= 5 * result["max"].sem
    assert np.allclose(result.collision.median, np.median(result.collision.values, axis=0))


def test_bad_runner_inputs():
    with pytest.raises(ValueError, match="leading dimension"):
        montecarlo.run("gauss", 10, 5, lambda s: {"x": s.max()}, seed=0)
    with pytest.raises(ValueError, match="dict"):
        montecarlo.run("gauss", 10, 5, lambda s: s.max(axis=-1), seed=0)
    with pytest.raises(ValueError, match="rows must be"):
        montecarlo.run("gauss", 10, 0, row_summary, seed=0)
    with pytest.raises(ValueError, match="seed"):
        montecarlo.run("gauss", 10, 5, row_summary, seed=-1)
    with pytest.raises(ValueError, match="unknown family"):
        montecarlo.run("nope", 10, 5, row_summary, seed=0)
    single = montecarlo.run("gauss", 10, 1, row_summary, seed=0)
    assert np.isnan(single["max"].sem)


def test_run_standard_draws_the_rows_the_chapters_drew_and_refuses_another_family():
    """Chapters 06 and 07 each defined run(name, n, r, ...) around montecarlo.run with the seed
    [*seed, STANDARD.index(name), n]; run_standard is that helper, once, and must draw the same rows."""
    seed, n, rows = [2605, 12697], 64, 40
    for name in ("gauss", families.STANDARD[-1]):
        fam = families.get(name)
        made = []

        def statistic_for(family):
            made.append(family.name)
            return lambda scores: {"top": scores.max(axis=1)}

        got = montecarlo.run_standard(name, n, rows, statistic_for, seed)
        want = montecarlo.run(fam, n, rows, lambda scores: {"top": scores.max(axis=1)},
                              seed=[*seed, families.STANDARD.index(name), n], max_bytes=2**25)
        assert made == [fam.name] and got.seed == want.seed
        np.testing.assert_array_equal(got["top"].values, want["top"].values)
    with pytest.raises(ValueError, match="'pareto1' is not one of critscale.families.STANDARD"):
        montecarlo.run_standard("pareto1", n, rows, statistic_for, seed)


def test_no_helper_is_defined_in_two_notebooks():
    """run was defined in chapters 06 and 07, verdict (two different functions) in 04 and 12, and window_statistic
    (two different statistics, each page's own: now gumbel_window_statistic and weibull_window_statistic) in 06
    and 07."""
    import re
    from collections import defaultdict
    from pathlib import Path

    import jupytext

    defs = defaultdict(set)
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.md")):
        for cell in jupytext.read(path).cells:
            if cell.cell_type == "code":
                for name in re.findall(r"^def (\w+)\(", cell.source, flags=re.M):
                    defs[name].add(path.name[:2])
    assert {k: sorted(v) for k, v in defs.items() if len(v) > 1} == {}
