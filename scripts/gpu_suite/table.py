"""The benchmark, declared: kernel entry points, implementations, grids and the sizes of each mode.

Everything the benchmark times is named here and nowhere else, so that renaming a kernel entry point
or adding a baseline is one line.  ``bench`` reads these tables; ``work`` builds the callables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Every field of critscale.kernels.RowStats (its FIELDS), i.e. the work one kernel call does;
# bench checks at run time that the kernels still return exactly these.
ALL_FIELDS = ("log_z", "entropy", "max_weight", "collision", "counts", "top", "delta2", "range", "n_valid", "m0",
              "kappa_lower", "kappa_upper")
# lse = log sum_i e^{beta s_i} = log_z + beta * top: what a log-sum-exp routine returns instead of log_z.
SOFTMAX_FIELDS = ("log_z", "entropy", "max_weight", "collision", "lse")


@dataclass(frozen=True)
class Kind:
    """One kernel kind: where its entry point lives and what one call reads."""

    name: str
    entry_points: tuple[str, ...]  # names in critscale.kernels; the first one present is called
    module: str  # critscale.kernels.<module>: its Triton kernels are the ones the counters attribute
    inputs: str


KINDS = {k.name: k for k in (
    Kind("scores", ("scores_row_stats", "row_stats"), "scores", "stored fp32 scores (rows, n)"),
    Kind("qk", ("qk_row_stats",), "qk", "bf16 q (rows, d) and k (n, d), one head, non-causal"),
    Kind("sampled", ("sampled_row_stats",), "sampled", "gauss rows generated in the kernel (nothing read)"),
)}
SAMPLED_FAMILY = "gauss"  # generated with shift 0, so the reference scores are the family's own
SEED = 12697


@dataclass(frozen=True)
class Grid:
    """A beta grid and a threshold grid."""

    name: str
    beta: tuple[float, ...]
    t: tuple[float, ...]


THRESHOLDS64 = (0.0,) + tuple(np.geomspace(1e-3, 20.0, 63).tolist())
# grid32: 32 betas 0.05 * 2^{k/8}, a doubling grid: 8 chains of the beta ladder, so 8 exp2 per score serve
# every beta and every sum p^2 (critscale.kernels.ladder).  grid32-geo: the 32 betas of the runs before the
# ladder (geometric from 0.05 to 50, ratio 1.25, no doubling pairs: 32 exp2 per score, each squared once for
# sum p^2, in four pass-2 chunks), for comparison with the recorded runs of that grid.
GRIDS = {g.name: g for g in (
    Grid("grid32", tuple((0.05 * 2.0 ** (np.arange(32) / 8)).tolist()), THRESHOLDS64),
    Grid("grid1", (1.0,), (1.0,)),
    Grid("grid32-geo", tuple(np.geomspace(0.05, 50.0, 32).tolist()), THRESHOLDS64),
)}


@dataclass(frozen=True)
class Impl:
    """One implementation: the fields it returns (its work) and how ``work`` builds it."""

    name: str
    fields: tuple[str, ...]
    description: str
    compile_mode: str | None = None  # torch.compile mode; None: not compiled


IMPLS = {i.name: i for i in (
    Impl("kernel", ALL_FIELDS, "the critscale.kernels entry point of the kind (Triton, two streamed passes)"),
    Impl("eager", ALL_FIELDS, "eager PyTorch from materialised fp32 scores, broadcast over beta and thresholds, "
                              "rows in chunks; float64 finishing and the kappa bracket as the kernel"),
    Impl("compile", ALL_FIELDS, "the eager function under torch.compile(dynamic=True), default mode",
         compile_mode="default"),
    Impl("compile-max-autotune", ALL_FIELDS, "the eager function under torch.compile(dynamic=True, "
                                             "mode='max-autotune-no-cudagraphs')",
         compile_mode="max-autotune-no-cudagraphs"),
    Impl("compile-beta-loop", ALL_FIELDS, "torch.compile of one beta's sums, called in a Python loop over beta "
                                          "(gaps materialised once per row chunk), counts and order statistics "
                                          "compiled apart", compile_mode="default"),
    Impl("compile-ladder", ALL_FIELDS, "the kernels' beta ladder (one exp per score and doubling chain, the other "
                                       "betas by squaring, C(beta) = A(2 beta)) in PyTorch under "
                                       "torch.compile(dynamic=True), default mode", compile_mode="default"),
    Impl("logsumexp", ("lse",), "torch.logsumexp(beta * s) at one beta: log-sum-exp only"),
    Impl("sdpa-lse", ("lse",), "the log-sum-exp that PyTorch's flash-attention forward returns (aten "
                               "_scaled_dot_product_flash_attention, V = K), at one beta folded into the scale"),
    Impl("sdpa-route", ("lse", "entropy", "collision"),
         "per beta, flash attention with V = K: lse(beta), H = lse - beta scale q.O, and sum p^2 = "
         "exp(lse(2 beta) - 2 lse(beta)) from a second call at 2 beta"),
)}


@dataclass(frozen=True)
class Block:
    """A group of timed points: one kind, one grid, the implementations compared at each n."""

    kind: str
    grid: str
    impls: tuple[str, ...]


BLOCKS = (
    Block("scores", "grid32", ("kernel", "eager", "compile", "compile-ladder", "compile-max-autotune",
                               "compile-beta-loop")),
    Block("scores", "grid1", ("kernel", "logsumexp")),
    Block("qk", "grid32", ("kernel", "eager", "compile", "compile-ladder", "compile-max-autotune", "compile-beta-loop",
                           "sdpa-route")),
    Block("qk", "grid1", ("kernel", "sdpa-lse")),
    Block("sampled", "grid32", ("kernel", "compile", "compile-ladder")),
    Block("scores", "grid32-geo", ("kernel",)),  # last: the first block the time budget drops
)


@dataclass(frozen=True)
class Sizes:
    """The sizes of one mode."""

    rows: int
    d: int
    kernel_n: dict  # kind -> n values of the grid32 block (the kernel at every one)
    grid1_n: tuple[int, ...]
    geo_n: tuple[int, ...]  # n of the grid32-geo block (the kernel only)
    baseline_n: tuple[int, ...]  # baselines run at these n only (and only where the kernel does)
    impl_max_n: dict = field(default_factory=dict)  # impl -> largest n it is timed at
    rows_at_n: dict = field(default_factory=dict)  # n -> rows, where fewer rows than ``rows`` are used
    reference_scores: int = 2**23  # float64 reference on about this many scores per point (>= 1 row)
    counters_n: int = 2**16  # the size that Nsight Compute profiles
    timing_budget_s: float = 0.3  # per implementation and point, beyond the 10 repetitions


SIZES = {
    # sized for one device command (scripts/gpu_session/gpu_session.sh): the kernels at 2^12 (fixed costs), 2^16 and 2^20
    # (the size of the design goals), sampled also at 2^24; eager, torch.compile (default and max-autotune) and
    # the compiled ladder at every baseline n up to 2^20, the size of the goals; the beta loop (32 compiled
    # calls) to 2^16.  Eager at 2^20 streams 512 row chunks of 2 GiB temporaries (seconds per call): the
    # results part's time budget skips, with that reason, whatever of it does not fit after the kernels.
    "full": Sizes(rows=4096, d=64,
                  kernel_n={"scores": (2**12, 2**16, 2**20), "qk": (2**12, 2**16, 2**20),
                            "sampled": (2**12, 2**20, 2**24)},
                  grid1_n=(2**12, 2**20), geo_n=(2**20,), baseline_n=(2**12, 2**16, 2**20),
                  impl_max_n={"compile-beta-loop": 2**16},
                  rows_at_n={2**24: 256}, reference_scores=2**21),
    "quick": Sizes(rows=4096, d=64,
                   kernel_n={"scores": (2**12, 2**16), "qk": (2**12, 2**16), "sampled": (2**12, 2**16)},
                   grid1_n=(2**16,), geo_n=(2**16,), baseline_n=(2**16,), impl_max_n={"eager": 2**12},
                   timing_budget_s=0.1),
    "smoke": Sizes(rows=8, d=16, kernel_n={"scores": (256,), "qk": (128,), "sampled": (256,)},
                   grid1_n=(256,), geo_n=(256,), baseline_n=(128, 256), reference_scores=2**12, counters_n=256,
                   timing_budget_s=0.0),
}
# (n_beta, n_t) kept from each grid in smoke mode
SMOKE_GRIDS = {"grid32": (4, 4), "grid1": (1, 1), "grid32-geo": (4, 4)}


def grid_values(grid: str, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """The beta and threshold grids of ``grid`` (the smoke mode keeps a few values spread over each)."""
    g = GRIDS[grid]
    beta, t = np.asarray(g.beta), np.asarray(g.t)
    if mode == "smoke":
        nb, nt = SMOKE_GRIDS[grid]
        beta = beta[np.linspace(0, len(beta) - 1, nb).round().astype(int)]
        t = t[np.linspace(0, len(t) - 1, nt).round().astype(int)]
    return beta, t


def points(block: Block, sizes: Sizes) -> list[tuple[int, tuple[str, ...]]]:
    """``[(n, impls timed at n)]`` of a block: the kernel at every n, each baseline where the table allows."""
    ns = {"grid32": sizes.kernel_n[block.kind], "grid1": sizes.grid1_n, "grid32-geo": sizes.geo_n}[block.grid]
    out = []
    for n in ns:
        impls = tuple(i for i in block.impls
                      if i == "kernel" or (n in sizes.baseline_n and n <= sizes.impl_max_n.get(i, n)))
        out.append((n, impls))
    return out
