"""Offline instruction counts: compile each kernel for sm_90a, disassemble, count its hot loop by pipe.

No GPU is needed: ``triton.compile`` targets ``GPUTarget("cuda", 90, 32)`` and Triton ships ``ptxas`` and
``cuobjdump`` (``triton/backends/nvidia/bin``).  Run it in a process where ``TRITON_INTERPRET=0``::

    TRITON_INTERPRET=0 python -m critscale.kernels.sass            # table of every kernel
    TRITON_INTERPRET=0 python -m critscale.kernels.sass --json out.json

For each kernel the hot loop is the innermost loop (a backward branch) nested deepest, the largest if several
(a tail loop after the blocks runs once); its instructions are counted per pipe and divided by the scores one
thread handles per iteration, which gives instructions per score.  Pass 2 runs its column loop in blocks (the
counts' block counter is flushed after each): the instructions of the loop around the hot loop that lie
outside it are spread over the scores of one block and added.  A kernel that runs both passes has its pass-1
loop (the largest innermost loop before the blocks) counted apart; the loops of one launch add.  Floors: with ``c_p`` instructions per score on pipe ``p`` and the pipe's rate
``r_p`` (thread-instructions per clock per SM, the CUDA C++ Programming Guide's throughput table for
compute capability 9.0), a score costs at least ``max_p c_p / r_p`` clocks of one SM, and at least
``c_total / 128`` for issue (4 schedulers x 1 warp-instruction per clock).  These floors come from the
compiled code, not from a count of the formulas.

Pipes: MUFU (ex2, lg2, sin, cos, rsqrt: 16/clk), XU conversions (F2I, I2F: 16), FMA (FFMA, FMUL, FADD: 128;
IMAD: 64, counted as FMA-heavy), ALU (compares, selects, min/max, integer and logic: 64), SHFL (warp
shuffles: 32), LSU (global and shared loads/stores: 32), UNIFORM (the scalar datapath, not counted against
the vector pipes), TENSOR (HMMA/HGMMA), CTRL (branches, barriers).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

__all__ = ["PIPE_RATE", "KernelCount", "compile_sass", "count_hot_loop", "kernel_specs", "launch_specs", "main",
           "pipe_of"]

ARCH = 90  # sm_90a (H100, H200)
PIPE_RATE = {"MUFU": 16, "XU": 16, "FMA": 128, "FMAHEAVY": 64, "ALU": 64, "SHFL": 32, "LSU": 32}
ISSUE_RATE = 128
_PIPES = [
    ("MUFU", r"MUFU"),
    ("XU", r"(F2I|I2F|F2F|FRND)(\.|$)"),
    ("SHFL", r"SHFL"),
    ("TENSOR", r"(HMMA|HGMMA|IMMA|WGMMA|GMMA)"),
    ("LSU", r"(LDG|STG|LDS|STS|LDL|STL|LDSM|LD|ST|ATOM|ATOMS|ATOMG|RED|LDGSTS|LDGDEPBAR|STSM|UTMALDG)(\.|$)"),
    ("FMAHEAVY", r"(IMAD|IMUL|IDP|IMMA)(\.|$)"),
    ("FMA", r"(FFMA|FMUL|FADD|HFMA2|HMUL2|HADD2|FMUL2|FADD2|FFMA2)(\.|$)"),
    ("CTRL", r"(BRA|BRX|JMP|CALL|RET|EXIT|BAR|BSSY|BSYNC|WARPSYNC|NOP|DEPBAR|YIELD|MEMBAR|ERRBAR|CCTL|"
             r"WARPGROUP|ELECT|ENDCOLLECTIVE|ACQBULK|SYNCS|FENCE|BPT|KILL)(\.|$)"),
    ("UNIFORM", r"(U[A-Z0-9]+|S2UR|R2UR|LDC|ULDC)(\.|$)"),
    ("ALU", r"[A-Z0-9]+"),
]
_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")


def pipe_of(opcode: str) -> str:
    """The pipe an SASS opcode issues to (see the module docstring)."""
    for name, pattern in _PIPES:
        if re.match(pattern, opcode):
            return name
    return "ALU"


def _bin(tool: str) -> str:
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / tool)


@dataclass
class Compiled:
    name: str
    sass: str
    registers: int
    spills: int
    shared: int


def compile_sass(fn, signature: dict[str, str], constexprs: dict[str, Any], div16: tuple[str, ...] = (),
                 num_warps: int = 4, num_stages: int = 3) -> Compiled:
    """Compile ``fn`` (a ``@triton.jit`` kernel) for sm_90a and disassemble it.

    ``signature`` maps every non-constexpr argument to a Triton type (``"*fp32"``, ``"i32"``, ``"fp32"``, ...);
    pointers and the arguments named in ``div16`` are marked divisible by 16, as the launcher's
    specialisation does for aligned tensors and multiples of 16.
    """
    sig = dict(signature)
    for name in constexprs:
        sig[name] = "constexpr"
    names = fn.arg_names
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a, ty in signature.items()
             if ty.startswith("*") or a in div16}
    src = ASTSource(fn=fn, signature={a: sig[a] for a in names}, constexprs=dict(constexprs), attrs=attrs)
    kernel = triton.compile(src, target=GPUTarget("cuda", ARCH, 32),
                            options={"num_warps": num_warps, "num_stages": num_stages})
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        sass = subprocess.run([_bin("cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
        res = subprocess.run([_bin("cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True,
                             check=True).stdout
    regs = re.search(r"REG:(\d+)", res)
    local = len(re.findall(r"\b(STL|LDL)(\.|\s)", sass))
    return Compiled(name=fn.__name__, sass=sass, registers=int(regs.group(1)) if regs else -1, spills=local,
                    shared=int(getattr(kernel.metadata, "shared", 0)))


@dataclass
class KernelCount:
    """Counts of a kernel's hot loop: per pipe per iteration, and per score."""

    kernel: str
    block: str
    registers: int
    local_memory_instructions: int
    shared_bytes: int
    loop_instructions: int
    scores_per_iteration: float
    per_pipe: dict = field(default_factory=dict)
    per_score: dict = field(default_factory=dict)
    opcodes: dict = field(default_factory=dict)
    floor_clocks_per_score: dict = field(default_factory=dict)
    chunk: int = 0  # which pass-2 launch of a call (grids larger than one chunk launch pass 2 once per chunk)
    block_instructions: int = 0  # instructions of the loop around the hot loop outside it (per block)
    scores_per_block: float = 0.0  # scores one thread handles per block (0: not counted)
    pass_: int = 0  # the pass whose loop this is (1 or 2)
    launch: int = 0  # the launch of the call it belongs to (a kernel running both passes: two loops, one launch)

    def bound(self) -> str:
        return max(self.floor_clocks_per_score, key=self.floor_clocks_per_score.get)


def parse(sass: str) -> list[tuple[int, str, str]]:
    """``(address, opcode, operands)`` of every instruction of a ``cuobjdump -sass`` listing."""
    return [(int(m.group(1), 16), m.group(3), m.group(4)) for m in _LINE.finditer(sass)]


def _loops(ins: list[tuple[int, str, str]]) -> list[tuple[int, int]]:
    """``(start, end)`` addresses of every loop (a backward branch, not the self-branch after EXIT)."""
    loops = []
    for addr, op, args in ins:
        m = re.match(r"\s*(0x[0-9a-f]+)", args) if op.startswith("BRA") else None
        if m and int(m.group(1), 16) < addr:
            loops.append((int(m.group(1), 16), addr))
    return loops


def _depth(lp: tuple[int, int], loops: list[tuple[int, int]]) -> int:
    return sum(1 for o in loops if o != lp and o[0] <= lp[0] and lp[1] <= o[1])


def _hot(loops: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The innermost loop nested deepest (a column loop inside its block loop, not a tail loop that runs once
    after it), the one with the most instructions if several."""
    inner = [lp for lp in loops if not any(o != lp and lp[0] <= o[0] and o[1] <= lp[1] for o in loops)]
    if not inner:
        return None
    deepest = max(_depth(lp, loops) for lp in inner)
    return max((lp for lp in inner if _depth(lp, loops) == deepest), key=lambda lp: lp[1] - lp[0])


def _first_loop(loops: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The pass-1 loop of a kernel that runs both passes: the innermost loop with the most instructions among
    those that end before the hot loop (with the loop around it, its blocks) begins."""
    hot = _hot(loops)
    if hot is None:
        return None
    around = [lp for lp in loops if lp != hot and lp[0] <= hot[0] and hot[1] <= lp[1]]
    start = min(lp[0] for lp in around + [hot])
    return _hot([lp for lp in loops if lp[1] < start])


def count_hot_loop(sass: str, first: bool = False) -> tuple[int, Counter, Counter]:
    """The innermost loop with the most instructions: (instructions, per-pipe counts, per-opcode counts).

    With ``first`` the loop of :func:`_first_loop` instead (pass 1 of a kernel that runs both passes).  A kernel
    without a loop (fully unrolled) is counted whole."""
    ins = parse(sass)
    loops = _loops(ins)
    hot = _first_loop(loops) if first else _hot(loops)
    if first and hot is None:
        raise ValueError("count_hot_loop: no loop before the hot loop (first=True)")
    lo, hi = hot if hot else (0, max((a for a, _, _ in ins), default=0))
    body = [op for addr, op, _ in ins if lo <= addr <= hi]
    ops = Counter(op.split(".")[0] for op in body)
    pipes = Counter(pipe_of(op) for op in body)
    return len(body), pipes, ops


def count_block_loop(sass: str) -> tuple[int, Counter]:
    """The instructions of the smallest loop around the hot loop that are not in the hot loop (the work done
    once per block of hot-loop iterations, e.g. the flush of the counts' block counter): (instructions,
    per-pipe counts); ``(0, {})`` when no loop encloses the hot loop."""
    ins = parse(sass)
    loops = _loops(ins)
    hot = _hot(loops)
    around = [lp for lp in loops if hot and lp != hot and lp[0] <= hot[0] and hot[1] <= lp[1]]
    if not around:
        return 0, Counter()
    lo, hi = min(around, key=lambda lp: lp[1] - lp[0])
    body = [op for addr, op, _ in ins if lo <= addr <= hi and not hot[0] <= addr <= hot[1]]
    return len(body), Counter(pipe_of(op) for op in body)


def count_kernel(c: Compiled, block: str, scores_per_iteration: float, scores_per_block: float = 0.0,
                 first: bool = False) -> KernelCount:
    """Counts per score of the hot loop, plus, with ``scores_per_block`` (the scores one thread handles per
    iteration of the loop around it), that loop's own instructions spread over its scores.  With ``first``
    the pass-1 loop of a kernel that runs both passes (:func:`count_hot_loop`)."""
    total, pipes, ops = count_hot_loop(c.sass, first)
    per_score = {p: v / scores_per_iteration for p, v in pipes.items()}
    per_score["total"] = total / scores_per_iteration
    block_total = 0
    if scores_per_block:
        block_total, block_pipes = count_block_loop(c.sass)
        for p, v in block_pipes.items():
            per_score[p] = per_score.get(p, 0.0) + v / scores_per_block
        per_score["total"] += block_total / scores_per_block
    per_score = dict(sorted(per_score.items()))
    floors = {p: per_score.get(p, 0.0) / r for p, r in PIPE_RATE.items()}
    floors["FMA"] = (per_score.get("FMA", 0.0) + per_score.get("FMAHEAVY", 0.0)) / PIPE_RATE["FMA"]
    floors["issue"] = per_score["total"] / ISSUE_RATE
    return KernelCount(kernel=c.name, block=block, registers=c.registers, local_memory_instructions=c.spills,
                       shared_bytes=c.shared, loop_instructions=total, scores_per_iteration=scores_per_iteration,
                       per_pipe=dict(pipes), per_score=per_score, opcodes=dict(ops.most_common(25)),
                       floor_clocks_per_score=floors, block_instructions=block_total,
                       scores_per_block=scores_per_block)


def launch_floor(counts: list[dict]) -> dict:
    """Floor in cycles per score of one launch whose loops (pass 1 and pass 2 of a kernel that runs both, or one
    loop) each run over every score: per pipe, and for issue, the loops' floors add (they share the pipes)."""
    keys = set().union(*(k["floor_clocks_per_score"] for k in counts))
    return {p: sum(k["floor_clocks_per_score"].get(p, 0.0) for k in counts) for p in sorted(keys)}


_COMMON = {"R": "i32", "n": "i32", "tiles": "i32", "SPLIT": "i32"}
_OUT1 = dict(o_top1="*fp32", o_top2="*fp32", o_low="*fp32", o_count="*i32", o_bad="*i32")
_OUT2 = dict(top_ptr="*fp32", snap_ptr="*fp32", tab_ptr="*i64", o_m0="*fp32", o_a="*fp32", o_b="*fp32",
             o_n="*i32")


def _kind_setup(kind: str) -> tuple:
    """(module, default GPU block, leading signature, compile-time flags, div16, num_stages, scores one thread
    handles per loop iteration of pass 1 and of pass 2) of a kind as the benchmark launches it: fp32 scores; bf16 ``q`` and ``k`` with
    ``d = 64``, not causal; gauss rows."""
    from . import qk, sampled, scores

    if kind == "scores":
        BM, BN, _, _, warps = scores.GPU_BLOCK
        return (scores, scores.GPU_BLOCK, {"x_ptr": "*fp32", "stride": "i32"}, {}, ("stride", "n"), 3,
                (2 * BM * BN / (32 * warps), scores.PASS2_TILES * BM * BN / (32 * warps)))  # pass 1: two tiles
    if kind == "sampled":
        BM, BN, _, _, warps = sampled.GPU_BLOCK
        return (sampled, sampled.GPU_BLOCK,
                {"seed": "i64", "p0": "fp32", "p1": "fp32", "top_score": "fp32", "row0": "i32"},
                dict(FAM=sampled.GAUSS.value, FAST=True), (), 3,
                (BM * BN / (32 * warps), 2 * BM * BN / (32 * warps)))  # pass 1: one tile per iteration, pass 2: two
    if kind == "qk":
        BM, BN, _, _, warps = qk.GPU_BLOCK
        return (qk, qk.GPU_BLOCK, {"q_ptr": "*bf16", "k_ptr": "*bf16", "s_qb": "i32", "s_qm": "i32", "s_kb": "i32",
                                   "s_kn": "i32", "d": "i32", "scale": "fp32", "causal_offset": "i32"},
                dict(BD=64, CAUSAL=False, CAST=False, IEEE=False, STAGES=qk.GPU_STAGES, s_qd=1, s_kd=1),
                ("s_qb", "s_qm", "s_kb", "s_kn"), qk.GPU_STAGES,
                (BM * BN / (32 * warps),) * 2)  # one tile per iteration (pipelined, not unrolled)
    raise ValueError(f"kind must be 'scores', 'qk' or 'sampled', got {kind!r}")


# The call the counts describe: the benchmark's largest common size on an H200 (132 multiprocessors), which
# fixes the split and so the number of count planes each lane keeps (critscale.kernels.counting).
CALL_ROWS, CALL_N, CALL_SMS = 4096, 2**20, 132


def call_layout(kind: str, rows: int = CALL_ROWS, n: int = CALL_N, sms: int = CALL_SMS) -> tuple[int, int]:
    """The split (column chunks per row) and the count planes of a call of ``kind`` on ``rows x n`` scores at the
    default GPU block (:func:`critscale.kernels.twopass.run_two_pass`)."""
    from .counting import planes_for
    from .twopass import COUNT_EXACT_LIMIT, choose_split

    mod, block, *_ = _kind_setup(kind)
    BM, BN = block[0], block[1]
    lanes = 4 if kind == "qk" else BN // mod.LANE_VEC
    row_blocks, n_tiles = -(-rows // BM), -(-n // BN)
    per_tile = BN // lanes
    split = max(choose_split(row_blocks, n_tiles, 4 * sms), -(-n_tiles * per_tile // COUNT_EXACT_LIMIT))
    split = min(split, n_tiles)
    tiles = -(-n_tiles // split)
    split = -(-n_tiles // tiles)
    return split, planes_for(tiles * per_tile)


def count_planes(kind: str, rows: int = CALL_ROWS, n: int = CALL_N, sms: int = CALL_SMS) -> int:
    """Count planes of a call of ``kind`` on ``rows x n`` scores at the default GPU block and split."""
    return call_layout(kind, rows, n, sms)[1]


def launch_specs(kind: str, beta, t) -> list[dict]:
    """The kernels one call of ``kind`` launches at its default GPU block on the grids ``beta`` and ``t``:
    pass 1, then pass 2 once per chunk, with the compile-time grid :func:`critscale.kernels.twopass.run_two_pass`
    gives each chunk (its ladder roots, levels, thresholds and bucket table) on the call of :data:`CALL_ROWS`
    rows of :data:`CALL_N` scores.  Where that call runs both passes in one program (a kind with a kernel
    ``_<kind>_fused`` and one column chunk per row), the first spec is that kernel, whose two loops are
    counted apart (``passes = (1, 2)``), and the pass-2 kernel follows for the other chunks."""
    import numpy as np

    from .ladder import beta_plan, chunks
    from .twopass import m0_mode, pow2, table_constexprs

    mod, block, lead, flags, div, stages, per_iter = _kind_setup(kind)
    BM, BN, NRC, NTC, warps = block
    t = np.asarray(t, dtype=np.float64)
    plan = beta_plan(np.asarray(beta, dtype=np.float64))
    NS, NTP = pow2(min(NRC, len(plan.roots)) * plan.levels), pow2(min(NTC, len(t)))
    split, npl = call_layout(kind)
    grids = [{}] + [dict(ROOTS2=c.roots2, NR=len(c.roots2), LVR=plan.levels, NS=NS, BNEED=c.bneed, NT=len(c.tcut),
                         NTP=NTP, **table_constexprs(c), NPL=npl, NPLP=pow2(npl), M0=m0_mode(i, c),
                         SNAP0=kind == "scores")
                    for i, c in enumerate(chunks(plan, t, NRC, NTC, kind == "qk"))]
    # tiles per block of the pass-2 column loop, as the kernels set them (their KB): count words per lane and tile
    # are V = BN / 4 for qk (one tile per iteration) and V = 4 for the others (two tiles per iteration for sampled,
    # scores.PASS2_TILES for scores)
    words, most = (BN // 4 if kind == "qk" else mod.LANE_VEC), int(mod.BLOCK_WORDS.value)  # the kind's block
    per = mod.PASS2_TILES if kind == "scores" else 2
    block_tiles = most // words if kind == "qk" else most // words // per * per
    per_block = block_tiles * BM * BN / (32 * warps)
    specs = [dict(kind=kind, passes=(1,) if i == 0 else (2,), chunk=max(0, i - 1), launch=i,
                  fn=getattr(mod, f"_{kind}_pass{1 if i == 0 else 2}"),
                  signature=dict(lead, **_COMMON, **(_OUT1 if i == 0 else _OUT2)),
                  constexprs=dict(BM=BM, BN=BN, **g, **flags), div16=div, num_warps=warps, num_stages=stages,
                  block=str(block), scores_per_iteration=(per_iter[min(i, 1)],),
                  scores_per_block=0.0 if i == 0 else per_block)
             for i, g in enumerate(grids)]
    fused = getattr(mod, f"_{kind}_fused", None)
    if fused is not None and split == 1:
        out2 = {k: v for k, v in _OUT2.items() if k not in ("top_ptr", "snap_ptr")}  # the maxima are its own
        specs[:2] = [dict(specs[1], passes=(1, 2), launch=0, fn=fused, signature=dict(lead, **_COMMON, **_OUT1, **out2),
                          scores_per_iteration=per_iter, scores_per_block=per_block)]
        for i, sp in enumerate(specs):
            sp["launch"] = i
    return specs


def kernel_specs(n_roots: int = 8, levels: int = 5, n_t: int = 64) -> list[dict]:
    """Every kind's kernels (:func:`launch_specs`) on a grid of ``n_roots`` ladder roots with ``levels`` levels
    (32 betas of ratio ``2^{1/8}``: 8 and 5) and ``n_t`` geometric thresholds."""
    beta = [2.0 ** (-3 + k / n_roots) for k in range(n_roots * (levels - 1))]
    t = [0.001 * 1.17 ** j for j in range(n_t)]
    return [sp for kind in ("scores", "sampled", "qk") for sp in launch_specs(kind, beta, t)]


def run(specs: list[dict]) -> list[KernelCount]:
    """Compile every spec of :func:`launch_specs` and count it: one :class:`KernelCount` per loop (pass), in order."""
    out = []
    for sp in specs:
        c = compile_sass(sp["fn"], sp["signature"], sp["constexprs"], sp.get("div16", ()), sp["num_warps"],
                         sp.get("num_stages", 3))
        passes = sp["passes"]
        for ps, per_iter in zip(passes, sp["scores_per_iteration"]):
            k = count_kernel(c, sp["block"], per_iter, sp["scores_per_block"] if ps == 2 else 0.0,
                             first=len(passes) > 1 and ps == 1)
            k.chunk, k.pass_, k.launch = sp.get("chunk", 0), ps, sp.get("launch", 0)
            out.append(k)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write the counts here")
    ap.add_argument("--roots", type=int, default=8)
    ap.add_argument("--levels", type=int, default=5)
    ap.add_argument("--thresholds", type=int, default=64)
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        ap.error("run with TRITON_INTERPRET=0: the interpreter does not compile kernels")
    counts = run(kernel_specs(args.roots, args.levels, args.thresholds))
    for k in counts:
        ps = k.per_score
        print(f"{k.kernel:16s} pass {k.pass_} chunk {k.chunk} launch {k.launch} block {k.block:20s} regs {k.registers:3d} "
              f"local-mem ops {k.local_memory_instructions:3d} "
              f"loop {k.loop_instructions:5d} instr / {k.scores_per_iteration:g} scores: "
              + " ".join(f"{p} {v:.2f}" for p, v in ps.items())
              + f" | bound {k.bound()} {k.floor_clocks_per_score[k.bound()]:.3f} clk/score/SM")
    if args.json:
        Path(args.json).write_text(json.dumps([k.__dict__ for k in counts], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
