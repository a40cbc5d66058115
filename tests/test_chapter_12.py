"""Chapter 12 (kernels): the live checks it records, and the compiled-code record its prose reads.

The ``book`` tests read ``build/results/ci/12_kernels.json`` written by `make test`'s ci build; the record
tests read ``results/sass/kernels_sass.json`` (``make sass-record``) and need no build.
"""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SASS = ROOT / "results" / "sass" / "kernels_sass.json"


@pytest.fixture(scope="module")
def sass():
    return json.loads(SASS.read_text())


@pytest.mark.book
def test_live_checks_find_no_violation(ci_results):
    """Counts equal cs.gap_counts, the kappa bracket contains the exact kappa, and the bracket on a covering
    geometric grid is within its proved factor: a kernel that counted a masked entry, dropped the tied
    maximum's multiplicity or widened the bracket records a violation here."""
    v = ci_results("12_kernels")["values"]
    assert v["count_mismatch"] == 0
    assert v["bracket_violations"] == 0
    assert v["factor_violations"] == 0
    assert 1.0 <= v["factor_worst"] <= v["factor_ratio"] * (1 + 1e-9)
    assert v["sampled_identical_scores"] == "bit-identical"


@pytest.mark.book
def test_live_errors_within_the_derived_fp32_budget(ci_results):
    """log Z, H and sum p^2 of fp32 scores within 1e-5 (critscale.kernels.testing), and the ladder's grid within
    the budget plus the squaring bound; a ladder that squared the wrong term (an error of order 1) or a
    fold that lost a tile fails.  The ladder must also save exponentials: fewer than one per beta."""
    v = ci_results("12_kernels")["values"]
    assert v["worst_fp32_rel_error"] <= 1e-5
    assert v["ladder_err"] <= v["ladder_tol"] <= 2e-5
    assert v["ladder_exp2"] < v["ladder_betas"]


@pytest.mark.book
def test_floors_glued_agree_with_the_record_and_the_goals(ci_results, sass):
    """The chapter's verdicts are those of its numbers (a verdict glued from a stale comparison would say
    'above' for a floor below its goal), and the exercise's plan is the ladder's plan."""
    from critscale.kernels import ladder

    v = ci_results("12_kernels")["values"]
    assert v["verdict_scores32"] == ("within" if v["floor_scores32_ms"] <= v["goal_scores32_ms"] else "above")
    assert v["verdict_scores1"] == ("within" if v["floor_scores1_ms"] <= v["goal_scores1_ms"] else "above")
    assert v["verdict_qk"].startswith("within") == (v["floor_qk_ms"] <= v["goal_qk_ms"])
    assert v["goal_scores1_ms"] == pytest.approx(1.2 * v["two_reads_ms"])  # the prose: 1.2 times the two reads
    assert v["exercise_exp2"] == ladder.beta_plan(0.05 * 2.0 ** (np.arange(32) / 4)).exp2_per_score


@pytest.mark.book
def test_floor_of_stored_scores_adds_the_cycles_of_one_launchs_loops(ci_results, sass):
    """The glued floor of stored scores on the 32-value grid, recomputed from the record by eq-12-floor: the
    loops of one launch (the kernel that runs both passes) add their cycles per score on each pipe and for issue,
    and that launch's bytes are two reads; separate launches add their times.  A chapter that added the two
    loops' times (each at least its read) would glue a larger floor and fail here, as one that dropped pass 1."""
    import critscale as cs

    bench = cs.gpu_results.load("kernels_bench")  # as the chapter reads it
    prov, ceil = bench["provenance"], bench["ceilings"]
    clock = prov.get("max_sm_clock_mhz") or ceil["sm_clock_mhz"]
    scores = 4096 * 2**20
    launches = {}
    for k in sass["kinds"]["scores"]["grid32"]["kernels"]:
        launches.setdefault(k.get("launch", 0 if k["pass"] == 1 else k["chunk"] + 1), []).append(k)
    total = 0.0
    for loops in launches.values():
        pipes = {p for k in loops for p in k["floor_clocks_per_score"]}
        cycles = max(sum(k["floor_clocks_per_score"].get(p, 0.0) for k in loops) for p in pipes)
        t_instr = 1e3 * scores * cycles / (prov["multiprocessors"] * clock * 1e6)
        total += max(t_instr, 1e3 * 4 * scores * len(loops) / ceil["copy_bandwidth_Bps"])
    v = ci_results("12_kernels")["values"]
    assert v["floor_scores32_ms"] == pytest.approx(total, rel=1e-9)


# The recorded grids were computed by np.geomspace and np.power on the machine that made the record: numpy's
# log10 and power differ between CPUs (SIMD or libm) by a few ulps, and an error of k ulps in the exponent y
# becomes ln(10) |y| k ulps in 10**y (|y| <= 3 here), so the same grid may differ by about 10 ulps between
# two machines.  16 ulps allows that; another grid (a different count, endpoint or spacing) differs by at
# least 1e-3 relative, about 4.5e12 ulps.
GRID_MAX_ULP = 16


def _ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| in units of the float64 spacing at the larger magnitude (0 where both are equal)."""
    return np.abs(a - b) / np.spacing(np.maximum(np.abs(a), np.abs(b)))


def grid_differences(recorded: dict, grid) -> list[str]:
    """How a recorded grid ({"beta": [...], "t": [...]}) differs from the benchmark's ``grid``: its count
    (exact), its endpoints and each value (within GRID_MAX_ULP ulps); empty when it is the same grid."""
    problems = []
    for axis in ("beta", "t"):
        have = np.asarray(recorded[axis], dtype=np.float64)
        want = np.asarray(getattr(grid, axis), dtype=np.float64)
        if have.shape != want.shape:
            problems.append(f"{axis}: {have.size} values recorded, the benchmark has {want.size}")
            continue
        apart = _ulps_apart(have, want)
        for where, i in (("first", 0), ("last", -1)):
            if apart[i] > GRID_MAX_ULP:
                problems.append(f"{axis}: {where} value {have[i]!r} recorded, the benchmark's is {want[i]!r}")
        worst = int(np.argmax(apart))
        if apart[worst] > GRID_MAX_ULP:
            problems.append(f"{axis}: value {worst} is {have[worst]!r}, the benchmark's {want[worst]!r} "
                            f"({apart[worst]:.3g} ulps apart, at most {GRID_MAX_ULP} allowed)")
    return problems


def _benchmark_grids():
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from gpu_suite import table

    return table.GRIDS


def test_sass_record_is_of_the_current_kernels_and_grids(sass):
    """The record's source hashes are those of this tree and its grids are the benchmark's: a change to the
    kernels or to the grids without `make sass-record` fails here (the chapter's page says so in words).
    The grids are compared by count and within GRID_MAX_ULP ulps, not bit for bit: the record was computed
    on another machine, whose numpy may round the last bit of a geometric grid differently."""
    grids = _benchmark_grids()
    stale = [f for f, h in sass["provenance"]["sources"].items()
             if hashlib.sha256((ROOT / f).read_bytes()).hexdigest() != h]
    assert not stale, f"results/sass/kernels_sass.json predates changes to {stale}: run `make sass-record`"
    assert set(sass["grids"]) <= set(grids), set(sass["grids"]) - set(grids)
    for name, grid in sass["grids"].items():
        assert not grid_differences(grid, grids[name]), (name, grid_differences(grid, grids[name]))


def test_grid_check_allows_the_last_bits_and_refuses_another_grid(sass):
    """A copy of the record whose grid32 thresholds are one or a few ulps off (the other machine's geomspace:
    element 5 one ulp up) passes; copies with one threshold fewer, another endpoint, the same endpoints and
    count but linear spacing, or betas of ratio 2^(1/4) instead of 2^(1/8) fail, each naming what differs."""
    grid = _benchmark_grids()["grid32"]
    t = np.asarray(sass["grids"]["grid32"]["t"])
    beta = np.asarray(sass["grids"]["grid32"]["beta"])
    nudged = t.copy()
    nudged[5] = np.nextafter(nudged[5], np.inf)
    nudged[20:30] *= 1 + 4 * np.finfo(np.float64).eps
    assert grid_differences({"beta": beta, "t": nudged}, grid) == []
    tampered = {
        "count": ({"beta": beta, "t": t[:-1]}, "63 values recorded, the benchmark has 64"),
        "endpoint": ({"beta": beta, "t": np.r_[0.0, np.geomspace(1e-3, 21.0, 63)]}, "last value"),
        "spacing": ({"beta": beta, "t": np.r_[0.0, np.linspace(1e-3, 20.0, 63)]}, "ulps apart"),
        "ratio": ({"beta": 0.05 * 2.0 ** (np.arange(32) / 4), "t": t}, "beta: last value"),
    }
    for what, (copy, message) in tampered.items():
        problems = grid_differences(copy, grid)
        assert problems and any(message in p for p in problems), (what, problems)


def test_sass_record_supports_the_chapters_statements(sass):
    """What the chapter states about the compiled code, checked on the record it reads: every pass 2 on the
    32-value grid bound by issue, with its MUFU floor below the issue floor (the ladder removed the exp2
    bottleneck); every pass 1 of stored scores and qk bound by the ALU, of sampled scores by the ALU or issue (the
    chapter glues which); no warp shuffle in a pass-2 loop and no local memory; the
    ladder, not the thresholds, the largest share of pass 2 of stored scores (the counts of all thresholds are one
    rank and one word per score)."""
    for kind, grids in sass["kinds"].items():
        for grid, rec in grids.items():
            for k in rec["kernels"]:
                assert k["local_memory_instructions"] == 0, (kind, grid, k["kernel"])
                if k["pass"] == 1:  # the comparisons and selects, or, for generated scores, issue
                    assert k["bound"] in ({"ALU"} if kind != "sampled" else {"ALU", "issue"}), (kind, grid)
                else:
                    assert k["per_score"].get("SHFL", 0.0) == 0.0, (kind, grid)
                if k["pass"] == 2 and grid == "grid32":
                    fl = k["floor_clocks_per_score"]
                    assert k["bound"] == "issue" and fl["MUFU"] < fl["issue"], (kind, fl)
    m = sass["kinds"]["scores"]["grid32"]["marginal"]
    pass2 = sass["kinds"]["scores"]["grid32"]["kernels"][1]["per_score"]["total"]
    assert m["first_chunk_thresholds"] * m["per_threshold"] < m["first_chunk_roots"] * m["per_root"]
    assert m["first_chunk_thresholds"] * m["per_threshold"] + m["first_chunk_roots"] * m["per_root"] <= pass2


def _ladder_fma(beta) -> int:
    """FMA-pipe instructions per score of the ladder's own arithmetic (scripts/gpu_suite/floors.py's model)."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from gpu_suite import floors

    return floors.ladder_instructions(beta)["fma"]


def test_compiled_ladder_issues_at_most_one_fma_pipe_instruction_per_chain_beyond_its_arithmetic(sass):
    """Pass 2 of stored scores on the 32-value grid: the FMA-pipe instructions per score (FFMA, FMUL, FADD and
    IMAD) exceed the ladder's arithmetic (per chain the exponent's multiply, an add to A per level, a squaring
    per level above the root with the last fused into its add, and one FFMA of B per requested beta) by at
    most one per chain.  Sums reduced over a thread's columns and then added to their accumulator (a lone
    multiply per sum of products) and a last squaring rounded on its own issued 1.9 per chain and fail here."""
    rec = sass["kinds"]["scores"]["grid32"]
    ps = rec["kernels"][1]["per_score"]
    roots = rec["marginal"]["first_chunk_roots"]
    extra = ps.get("FMA", 0.0) + ps.get("FMAHEAVY", 0.0) - _ladder_fma(sass["grids"]["grid32"]["beta"])
    assert 0.0 <= extra <= roots, (extra, roots)


def test_stored_score_pass1_issues_fewer_cycles_than_its_read_takes(sass):
    """Pass 1 of stored scores reads 4 bytes per score; at the copy bandwidth of the recorded H200 run
    (results/gpu/kernels_bench.json: multiprocessors and clock) that read takes longer than the pass's
    slowest pipe or issue, so the pass runs at its read.  The tree reduction of the top two over a thread's
    columns needed 17.4 ALU instructions per score, 0.27 cycles of one multiprocessor against 0.24 for the
    read, and fails here."""
    bench = json.loads((ROOT / "results" / "gpu" / "kernels_bench.json").read_text())
    prov, ceil = bench["provenance"], bench["ceilings"]
    import re

    clock = prov.get("max_sm_clock_mhz")
    if clock is None:
        clock = float(re.search(r"(\d+) MHz", prov["nvidia_smi"]).group(1))
    bytes_per_cycle = ceil["copy_bandwidth_Bps"] / (prov["multiprocessors"] * clock * 1e6)
    read_cycles = 4.0 / bytes_per_cycle
    for grid in ("grid32", "grid1"):
        k = sass["kinds"]["scores"][grid]["kernels"][0]
        assert k["pass"] == 1
        assert max(k["floor_clocks_per_score"].values()) < read_cycles, (grid, k["floor_clocks_per_score"], read_cycles)
