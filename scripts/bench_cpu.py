#!/usr/bin/env python3
"""CPU speed of critscale's float64 library against the direct numpy and scipy routes, as ratios within one run.

    .venv/bin/python scripts/bench_cpu.py               # 7 repetitions: about 3 min on 2 shared cores
    .venv/bin/python scripts/bench_cpu.py --repeats 3 --row24   # plus one 2**24 row at 32 betas, once

Prints, for float64 Gaussian rows:

- ``softmax_stats`` at 1 beta and at the 32 betas of the GPU benchmark's ``grid32`` ladder
  (``0.05 * 2**(k/8)``), for a few ``(rows, n)``: the library (cache-sized blocks, one beta at a time)
  against the route it replaced (the ``(rows, beta, cols)`` broadcast ``critscale.softmax._gap_sums_broadcast``
  behind the stepwise checks of the scores), against the naive numpy route (per beta: ``exp``, normalise,
  then entropy, collision and maximum of the probabilities) and against scipy (``logsumexp`` and
  ``scipy.special.softmax``, then the same three reductions); every route returns the same four fields;
- the share of validation (``critscale._validate.as_scores``) in ``softmax_stats`` at 1 beta, and that
  of the stepwise checks in the old route;
- ``accumulation_scale`` against a bare ``np.sort`` of the same rows, at ``n = 2**14 .. 2**20``, and
  the old sort-of-the-gaps route against it.

Before timing, the library's fields are compared with the old route's (largest relative difference printed).
Each repetition runs every route of a point once, in alternating order, so drift from other jobs on a
shared machine falls on all of them.  Each route's time is its process CPU time (every route is
single-threaded numpy), which time spent waiting for a core shared with other jobs does not inflate as it
does the wall-clock time; the tables show the minimum and the median CPU time and the minimum wall time
over the repetitions, and every ratio is a ratio of minimum CPU times (the least disturbed repetition).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable

import numpy as np

import critscale
from critscale import _validate, softmax
from critscale.gaps import _sorted_gaps

GRID32 = 0.05 * 2.0 ** (np.arange(32) / 8)  # scripts/gpu_suite/table.py: the grid32 ladder
SOFTMAX_SHAPES = ((64, 4096), (1024, 1024), (16, 2**16), (1, 2**20))
SORT_ELEMENTS = 2**20  # rows * n of each accumulation_scale point


def old_validate(scores: np.ndarray) -> np.ndarray:
    """The checks of the scores as they were: NaN, +inf, empty rows, then the finite range, one at a time."""
    flat = scores.reshape(-1, scores.shape[-1])
    _validate._check_entries(scores, flat, "scores", scores.shape[:-1])
    valid = np.isfinite(flat)
    top = np.max(flat, axis=-1)
    low = np.min(np.where(valid, flat, np.inf), axis=-1)
    if not np.isfinite(top - low).all():
        raise ValueError("scores: the range max - min overflows float64")
    return flat


def old_softmax_stats(scores: np.ndarray, betas: np.ndarray) -> softmax.SoftmaxStats:
    """``softmax_stats`` as it was: stepwise checks, then the ``(rows, beta, cols)`` broadcast."""
    flat = old_validate(scores)
    gaps = softmax._gaps_unsorted(flat)
    return softmax._stats_from_sums(softmax._gap_sums_broadcast(gaps, betas), betas)


def _fields(probs: np.ndarray, log_z: np.ndarray) -> tuple:
    """log Z, entropy, max weight and collision of normalised probabilities ``(rows, n)``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.sum(np.where(probs > 0, probs * np.log(probs), 0.0), axis=-1)
    return log_z, entropy, probs.max(axis=-1), np.sum(probs * probs, axis=-1)


def naive_numpy(scores: np.ndarray, betas: np.ndarray) -> list[tuple]:
    """The textbook route: per beta, ``exp(beta (s - max))``, normalise, reduce."""
    top = scores.max(axis=-1, keepdims=True)
    out = []
    for beta in betas:
        weights = np.exp(beta * (scores - top))
        z = weights.sum(axis=-1, keepdims=True)
        out.append(_fields(weights / z, np.log(z[:, 0])))
    return out


def scipy_route(scores: np.ndarray, betas: np.ndarray) -> list[tuple]:
    """``scipy.special.logsumexp`` for log Z and ``scipy.special.softmax`` for the probabilities, per beta."""
    from scipy.special import logsumexp
    from scipy.special import softmax as scipy_softmax

    top = scores.max(axis=-1)
    out = []
    for beta in betas:
        logits = beta * scores
        out.append(_fields(scipy_softmax(logits, axis=-1), logsumexp(logits, axis=-1) - beta * top))
    return out


def old_accumulation_scale(scores: np.ndarray, K: int = 2) -> np.ndarray:
    """``accumulation_scale`` as it was: stepwise checks, sort the gaps, divide, maximum."""
    flat = old_validate(scores)
    log_counts = np.log(np.arange(1, flat.shape[1] + 1, dtype=np.float64)[K - 1:])
    with np.errstate(divide="ignore"):
        return (log_counts / _sorted_gaps(flat)[:, K - 1:]).max(axis=-1)


Times = dict[str, dict[str, list[float]]]  # route -> {"cpu": seconds, "wall": seconds}


def timings(routes: dict[str, Callable[[], object]], repeats: int) -> Times:
    """CPU and wall seconds of each route, ``repeats`` times, the order of the routes alternating."""
    names = list(routes)
    out: Times = {name: {"cpu": [], "wall": []} for name in names}
    for rep in range(repeats):
        for name in names if rep % 2 == 0 else names[::-1]:
            wall, cpu = time.perf_counter(), time.process_time()
            routes[name]()
            out[name]["cpu"].append(time.process_time() - cpu)
            out[name]["wall"].append(time.perf_counter() - wall)
    return out


def best(times: Times, name: str) -> float:
    """The minimum CPU time of a route: the repetition least disturbed by other jobs."""
    return min(times[name]["cpu"])


def show(label: str, times: Times, reference: str) -> None:
    """One line per route: min and median CPU time and min wall time in ms, and the ratio of CPU minima."""
    base = best(times, reference)
    for name, t in times.items():
        cpu_min, cpu_median = min(t["cpu"]) * 1e3, statistics.median(t["cpu"]) * 1e3
        print(f"  {label:<22} {name:<18} cpu min {cpu_min:9.2f} median {cpu_median:9.2f}"
              f"  wall min {min(t['wall']) * 1e3:9.2f} ms  {best(times, name) / base:6.2f}x {reference}")


def max_rel_diff(new: tuple, old: tuple) -> float:
    """Largest ``|new - old| / |old|`` over the fields (0 where both are equal)."""
    worst = 0.0
    for a, b in zip(new, old):
        a, b = np.asarray(a), np.asarray(b)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(a == b, 0.0, np.abs(a - b) / np.abs(b))
        worst = max(worst, float(rel.max()))
    return worst


def bench_softmax(rng: np.random.Generator, repeats: int) -> None:
    print("softmax_stats (float64 Gaussian rows; 32 betas = grid32, 1 beta = 1.0)", flush=True)
    for rows, n in SOFTMAX_SHAPES:
        scores = rng.standard_normal((rows, n))
        for betas in (np.array([1.0]), GRID32):
            label = f"{rows}x{n}, {len(betas)} beta"
            diff = max_rel_diff(critscale.softmax_stats(scores, betas), old_softmax_stats(scores, betas))
            routes = {"library": lambda: critscale.softmax_stats(scores, betas),
                      "old broadcast": lambda: old_softmax_stats(scores, betas),
                      "naive numpy": lambda: naive_numpy(scores, betas),
                      "scipy": lambda: scipy_route(scores, betas)}
            if len(betas) == 1:
                routes["validation"] = lambda: _validate.as_scores(scores)
                routes["old validation"] = lambda: old_validate(scores)
            times = timings(routes, repeats)
            new, old = best(times, "library"), best(times, "old broadcast")
            print(f" {label}: old / library = {old / new:.2f}, naive numpy / library = "
                  f"{best(times, 'naive numpy') / new:.2f}, scipy / library = {best(times, 'scipy') / new:.2f}; "
                  f"max rel. diff to old {diff:.1e}")
            if len(betas) == 1:
                checks, old_checks = best(times, "validation"), best(times, "old validation")
                print(f"   validation share: library {checks / new:.0%}, old route {old_checks / old:.0%}; "
                      f"old checks / one scan = {old_checks / checks:.2f}")
            show(label, times, "library")


def bench_sort(rng: np.random.Generator, repeats: int) -> None:
    print(f"accumulation_scale against np.sort (float64 Gaussian rows, rows * n = 2**{SORT_ELEMENTS.bit_length() - 1})")
    for log_n in (14, 16, 18, 20):
        n = 2**log_n
        scores = rng.standard_normal((SORT_ELEMENTS // n, n))
        assert np.array_equal(critscale.accumulation_scale(scores), old_accumulation_scale(scores))
        times = timings({"np.sort": lambda: np.sort(scores, axis=-1),
                         "accumulation_scale": lambda: critscale.accumulation_scale(scores),
                         "old route": lambda: old_accumulation_scale(scores)}, repeats)
        base = best(times, "np.sort")
        print(f" n = 2**{log_n}: accumulation_scale / np.sort = {best(times, 'accumulation_scale') / base:.2f}, "
              f"old route / np.sort = {best(times, 'old route') / base:.2f}")
        show(f"n = 2**{log_n}", times, "np.sort")


def bench_row24() -> None:
    print("one row of 2**24 at the 32 betas of grid32 (once each; the GPU benchmark's float64 reference)")
    scores = np.random.default_rng(24).standard_normal((1, 2**24))
    for name, route in (("library", critscale.softmax_stats), ("old broadcast", old_softmax_stats)):
        wall, cpu = time.perf_counter(), time.process_time()
        route(scores, GRID32)
        print(f"  {name:<14} cpu {time.process_time() - cpu:7.2f} s  wall {time.perf_counter() - wall:7.2f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="repetitions of each point (default 7)")
    parser.add_argument("--row24", action="store_true", help="also time one 2**24 row at 32 betas, once")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    print(f"numpy {np.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start")
    rng = np.random.default_rng(0)
    bench_softmax(rng, args.repeats)
    bench_sort(rng, args.repeats)
    if args.row24:
        bench_row24()
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
