"""The beta ladder: one exp2 per score serves every beta of a doubling chain, by squaring.

``e^{-2 beta Delta} = (e^{-beta Delta})^2``, so on a grid that contains ``beta, 2 beta, 4 beta, ...`` only
the lowest value of each chain needs an exponential; the others are one multiplication each.  A geometric
grid of ratio ``2^{1/m}`` is ``m`` such chains: its ``n_beta`` values cost ``m`` exp2 per score instead of
``n_beta``.  ``sum p^2`` needs ``C(beta) = sum_{Delta>0} e^{-2 beta Delta} = A(2 beta)``, the ``A`` sum one
level up the same chain, so it costs no exponential at all.

Plan (host, float64, cached per grid): the set ``E = {beta} U {2 beta}`` of positive exponents the sums
need; its *roots* are the elements whose half is not in ``E``; each root ``r`` carries ``levels`` values
``r 2^l``.  A value within a relative ``RATIO_TOL`` of twice another counts as exactly twice it (a grid
``beta_0 2^{k/m}`` computed in float64 is doubling only to the last bit); the difference is far below the
float32 rounding of ``beta log2(e)`` itself.  ``beta = 0`` needs no sums: ``A(0) = C(0) = n_valid - m0``
and ``H(0) = log Z(0)`` (``beta B = 0``), filled in by the finishing step.

Error of a squared term (the bound :func:`term_error_bound` states and ``tests/test_kernels_scores.py``
checks on adversarial gaps); chains are cut after :data:`MAX_SQUARINGS` squarings.  With ``u = 2^-24``
and ``eps`` the relative error of one exp2:
the kernel forms ``b = fl(r log2 e)``, ``x = fl(b Delta)`` (``Delta`` itself exact or rounded once),
``w_0 = exp2(-x)`` and ``w_l = fl(w_{l-1}^2)``; so ``w_l = e^{-beta_l Delta (1 + eta)} (1 + eps)^{2^l}
prod_j (1 + delta_j)^{2^{l-j}}`` with ``|eta| <= (1+u)^3 - 1`` and ``|delta_j| <= u``, hence

    |w_l / e^{-beta_l Delta} - 1| <= e^{3.0001 u beta_l Delta} (1 + eps)^{2^l} (1 + u)^{2^l - 1} - 1
                                   ~ 3 u beta_l Delta + 2^l eps + (2^l - 1) u.

The first term is that of an exp2 evaluated directly at ``beta_l`` (the rounding of the exponent); the
squarings add ``(2^l - 1)(eps + u)``: at most ``15 (eps + u) = 2.7e-6`` for four levels with ``eps = 2^-23``.
Terms are positive, so the relative error of ``A``, ``B`` and ``C`` is at most the largest term error plus
the float32 summation error.  Results below ``2^-126`` flush to zero on the GPU (the absolute floor of
:mod:`critscale.kernels.testing`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from .counting import CountTable, threshold_groups

__all__ = ["BetaPlan", "Chunk", "EX2_REL_GPU", "EX2_REL_INTERPRETER", "MAX_SQUARINGS", "RATIO_TOL", "beta_plan",
           "chunks", "device_grids", "term_error_bound"]

LOG2E = 1.4426950408889634
U32 = 2.0 ** -24  # unit roundoff of float32
RATIO_TOL = 2.0 ** -36
# Longest chain: a term at level l carries (2^l - 1)(eps + u) more error than one exp2, so chains are cut
# after four squarings (at most 15 (eps + u) = 4.5e-6 on the GPU); a longer doubling run starts a new root.
MAX_SQUARINGS = 4
# Relative error of one exp2: the PTX ISA's bound for ex2.approx.f32 (2 ulp) on the GPU; numpy's float32
# exp2 in the interpreter (1 ulp: its measured worst case on the tests' inputs is below it).
EX2_REL_GPU = 2.0 ** -22
EX2_REL_INTERPRETER = 2.0 ** -23


def term_error_bound(level, beta_delta, ex2_rel: float) -> np.ndarray:
    """Bound on the relative error of one term ``e^{-beta Delta}`` computed ``level`` squarings above its root.

    ``beta_delta`` is the exact ``beta Delta`` of the term; see the module docstring for the derivation.
    """
    level = np.asarray(level, dtype=np.float64)
    reps = 2.0 ** level
    return (np.exp(3.0001 * U32 * np.asarray(beta_delta, dtype=np.float64)) * (1 + ex2_rel) ** reps
            * (1 + U32) ** (reps - 1) - 1)


@dataclass(frozen=True)
class BetaPlan:
    """How the sums at a beta grid are made from chains ``root * 2^level``.

    ``roots`` (n_roots,) float64, ascending; every root carries ``levels`` values.  For each requested beta:
    ``a_slot`` = ``root * levels + level`` of ``beta`` in the (roots, levels) table of sums (``-1`` for
    ``beta = 0``), ``c_slot`` the slot of ``2 beta``, ``level`` its level (for the error bound).
    """

    beta: np.ndarray
    roots: np.ndarray
    levels: int
    a_slot: np.ndarray
    c_slot: np.ndarray
    level: np.ndarray

    @property
    def exp2_per_score(self) -> int:
        return len(self.roots)


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= RATIO_TOL * max(abs(a), abs(b))


@functools.lru_cache(maxsize=64)
def _plan(beta: tuple[float, ...]) -> BetaPlan:
    pos = sorted({b for b in beta if b > 0} | {2 * b for b in beta if b > 0})
    values: list[float] = []
    for v in pos:  # merge values equal within RATIO_TOL (ascending, so compare with the last kept)
        if not values or not _same(values[-1], v):
            values.append(v)
    slot_of: dict[int, tuple[int, int]] = {}  # index into values -> (root, level)
    roots: list[float] = []
    for i, v in enumerate(values):
        parent = next((j for j in range(i) if _same(values[j], v / 2)), None)
        if parent is None:
            slot_of[i] = (len(roots), 0)
            roots.append(v)
        elif slot_of[parent][1] == MAX_SQUARINGS:
            slot_of[i] = (len(roots), 0)
            roots.append(v)
        else:
            r, lev = slot_of[parent]
            slot_of[i] = (r, lev + 1)
    levels = 1 + max((lev for _, lev in slot_of.values()), default=0)

    def find(x: float) -> tuple[int, int]:
        i = next(j for j, v in enumerate(values) if _same(v, x))
        return slot_of[i]

    a_slot, c_slot, level = [], [], []
    for b in beta:
        if b == 0:
            a_slot.append(-1)
            c_slot.append(-1)
            level.append(0)
            continue
        ra, la = find(b)
        rc, lc = find(2 * b)
        a_slot.append(ra * levels + la)
        c_slot.append(rc * levels + lc)
        level.append(la)
    return BetaPlan(beta=np.asarray(beta, dtype=np.float64), roots=np.asarray(roots, dtype=np.float64),
                    levels=levels, a_slot=np.asarray(a_slot, dtype=np.int64),
                    c_slot=np.asarray(c_slot, dtype=np.int64), level=np.asarray(level, dtype=np.int64))


def beta_plan(beta: np.ndarray) -> BetaPlan:
    """The (cached) ladder plan of a validated float64 beta grid."""
    return _plan(tuple(float(b) for b in np.asarray(beta, dtype=np.float64)))


@dataclass(frozen=True)
class Chunk:
    """One pass-2 launch: its ladder roots times ``log2(e)`` and its thresholds, as float32 values (Python
    floats: compile-time constants of the kernel), the offset of its first root, and the bucket table that
    turns a gap into its rank among the thresholds (:mod:`critscale.kernels.counting`)."""

    roots2: tuple[float, ...]
    bneed: tuple[bool, ...]  # per slot (root * levels + level): is B needed there (a requested beta)?
    tcut: tuple[float, ...]  # the chunk's distinct float32 thresholds, ascending
    first_root: int
    first_t: int
    t_index: tuple[int, ...] = ()  # for each threshold of t in this chunk: its index in tcut
    table: CountTable | None = None


@functools.lru_cache(maxsize=64)
def _chunks(plan_key: tuple[float, ...], t: tuple[float, ...], roots_per_chunk: int,
            t_per_chunk: int, compact: bool = False) -> tuple[Chunk, ...]:
    plan = _plan(plan_key)
    roots2 = [float(np.float32(r * LOG2E)) for r in plan.roots]
    groups = threshold_groups(t, t_per_chunk, compact)
    nch = max(1, -(-len(plan.roots) // roots_per_chunk), len(groups))
    wanted = {int(a) for a in plan.a_slot if a >= 0}  # slots of requested betas; the others only feed C
    bneed = [slot in wanted for slot in range(len(plan.roots) * plan.levels)]
    per = roots_per_chunk * plan.levels
    out = []
    for c in range(nch):
        g = groups[c] if c < len(groups) else None
        out.append(Chunk(roots2=tuple(roots2[c * roots_per_chunk:(c + 1) * roots_per_chunk]),
                         bneed=tuple(bneed[c * per:(c + 1) * per]),
                         tcut=g.values if g else (), first_root=c * roots_per_chunk,
                         first_t=g.first if g else len(t), t_index=g.index if g else (),
                         table=g.table if g else None))
    return tuple(out)


def chunks(plan: BetaPlan, t: np.ndarray, roots_per_chunk: int, t_per_chunk: int,
           compact: bool = False) -> tuple[Chunk, ...]:
    """The pass-2 launches of a plan and a threshold grid (cached per grid and chunk sizes); ``compact``: word
    tables held on chip (:func:`critscale.kernels.counting.count_table`)."""
    return _chunks(tuple(float(b) for b in plan.beta), tuple(float(x) for x in t), int(roots_per_chunk),
                   int(t_per_chunk), bool(compact))


@functools.lru_cache(maxsize=64)
def _device_grids(plan_key: tuple[float, ...], t: tuple[float, ...], device: str) -> tuple[torch.Tensor, ...]:
    plan = _plan(plan_key)
    dev = torch.device(device)
    return (torch.as_tensor(plan.a_slot, device=dev), torch.as_tensor(plan.c_slot, device=dev),
            torch.as_tensor(plan.beta, dtype=torch.float64, device=dev),
            torch.as_tensor(np.asarray(t, dtype=np.float64), device=dev))


def device_grids(plan: BetaPlan, t: np.ndarray, device: torch.device) -> tuple[torch.Tensor, ...]:
    """``a_slot``, ``c_slot``, ``beta`` and ``t`` (float64) on ``device``, uploaded once per grid and device,
    so that a call uploads nothing and waits for nothing before its end."""
    return _device_grids(tuple(float(b) for b in plan.beta), tuple(float(x) for x in t), str(device))
