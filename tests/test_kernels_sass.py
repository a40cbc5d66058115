"""``critscale.kernels.sass``: offline SASS counts for sm_90a (no GPU needed).

The parser and pipe table are checked on a hand-written listing (a wrong loop detection or pipe would
change the counts), and the whole path (compile for sm_90a, ``cuobjdump``, count) on the exp2 micro-kernel,
whose loop must issue exactly four ``MUFU.EX2`` per iteration (its four chains).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from critscale.kernels.sass import count_hot_loop, pipe_of

LISTING = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0020*/                   FMUL R8, R4, -1.44 ;
        /*0030*/                   MUFU.EX2 R9, R8 ;
        /*0040*/                   FSET.BF.LE.AND R10, R4, 0.5, PT ;
        /*0050*/                   FADD R11, R11, R10 ;
        /*0060*/                   FFMA R12, R9, R4, R12 ;
        /*0070*/                   SHFL.BFLY PT, R13, R12, 0x1, 0x1f ;
        /*0080*/                   ISETP.GE.AND P0, PT, R0, R3, PT ;
        /*0090*/               @!P0 BRA 0x10 ;
        /*00a0*/                   STG.E desc[UR4][R2.64], R12 ;
        /*00b0*/                   EXIT ;
"""


def test_pipes_and_hot_loop_of_a_listing():
    total, pipes, ops = count_hot_loop(LISTING)
    assert total == 9  # 0x10 .. 0x90: the backward branch closes the loop
    assert pipes == {"LSU": 1, "FMA": 3, "MUFU": 1, "ALU": 2, "SHFL": 1, "CTRL": 1}
    assert ops["FSET"] == 1 and ops["MUFU"] == 1
    assert pipe_of("IMAD.MOV.U32") == "FMAHEAVY" and pipe_of("STL.64") == "LSU"
    assert pipe_of("HGMMA.64x32x16") == "TENSOR"
    assert pipe_of("I2F.U32") == "XU" and pipe_of("UIADD3") == "UNIFORM" and pipe_of("BAR.SYNC") == "CTRL"


SCRIPT = """
import json
import sys
sys.path.insert(0, SCRIPTS_DIR)
from gpu_suite.env import ensure_importable  # the installed critscale, or a one-line reason it is not
ensure_importable()
from critscale.kernels import ceilings, sass
c = sass.compile_sass(ceilings.exp2_chains, {"x_ptr": "*fp32", "o_ptr": "*fp32"}, {"ITERS": 64, "BLOCK": 128},
                      num_warps=4)
k = sass.count_kernel(c, "BLOCK 128", 1)
assert "sm_90a" in c.sass
print(json.dumps({"pipes": k.per_pipe, "ops": k.opcodes, "regs": k.registers}))
"""


@pytest.mark.slow
def test_compiles_for_sm90a_and_counts_the_exp2_loop():
    """Compile the exp2 micro-kernel for sm_90a in a process without the interpreter: its 64 iterations of four
    chains are unrolled (no loop: the whole kernel is counted) and issue exactly 256 MUFU.EX2 and no shuffle.
    Fails if ptxas/cuobjdump are missing, if the target is not sm_90a, or if the counting drops or adds any."""
    env = dict(os.environ, TRITON_INTERPRET="0")
    script = SCRIPT.replace("SCRIPTS_DIR", repr(str(Path(__file__).resolve().parents[1] / "scripts")))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["ops"]["MUFU"] == 256 and res["pipes"]["MUFU"] == 256 and "SHFL" not in res["pipes"]
    assert 0 < res["regs"] <= 255


NESTED = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LOP3.LUT R20, RZ, RZ, RZ, 0x0, !PT ;
        /*0020*/                   FMUL R8, R4, -1.44 ;
        /*0030*/                   MUFU.EX2 R9, R8 ;
        /*0040*/                   FADD R11, R11, R9 ;
        /*0050*/               @!P0 BRA 0x20 ;
        /*0060*/                   LOP3.LUT R21, R21, R20, RZ, 0x96, !PT ;
        /*0070*/                   LOP3.LUT R22, R22, R20, RZ, 0xc0, !PT ;
        /*0080*/               @!P1 BRA 0x10 ;
        /*0090*/                   EXIT ;
"""


def test_block_loop_around_the_hot_loop_is_spread_over_its_scores():
    """A loop around the hot loop (pass 2's blocks, flushed after each): its instructions outside the hot loop
    (0x10, 0x60, 0x70, 0x80: four) are counted apart, and count_kernel adds them spread over a block's scores."""
    from critscale.kernels.sass import Compiled, count_block_loop, count_kernel

    total, pipes, _ = count_hot_loop(NESTED)
    assert total == 4 and pipes == {"FMA": 2, "MUFU": 1, "CTRL": 1}
    n, extra = count_block_loop(NESTED)
    assert n == 4 and extra == {"ALU": 3, "CTRL": 1}
    assert count_block_loop(LISTING) == (0, {})
    k = count_kernel(Compiled("k", NESTED, 32, 0, 0), "b", scores_per_iteration=2, scores_per_block=8)
    assert k.per_score["total"] == 4 / 2 + 4 / 8 and k.per_score["ALU"] == 3 / 8
    assert k.block_instructions == 4


FUSED = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   FMNMX R2, R2, R3, !PT ;
        /*0020*/                   FSETP.GEU.AND P2, PT, R3, R4, PT ;
        /*0030*/               @!P0 BRA 0x10 ;
        /*0040*/                   LOP3.LUT R20, RZ, RZ, RZ, 0x0, !PT ;
        /*0050*/                   FMUL R8, R4, -1.44 ;
        /*0060*/                   MUFU.EX2 R9, R8 ;
        /*0070*/                   FADD R11, R11, R9 ;
        /*0080*/               @!P1 BRA 0x50 ;
        /*0090*/                   LOP3.LUT R21, R21, R20, RZ, 0x96, !PT ;
        /*00a0*/               @!P2 BRA 0x40 ;
        /*00b0*/                   FMUL R8, R4, -1.44 ;
        /*00c0*/                   MUFU.EX2 R9, R8 ;
        /*00d0*/                   FADD R11, R11, R9 ;
        /*00e0*/                   FADD R12, R12, R9 ;
        /*00f0*/                   FADD R13, R13, R9 ;
        /*0100*/               @!P3 BRA 0xb0 ;
        /*0110*/                   EXIT ;
"""


def test_a_kernel_running_both_passes_has_its_loops_counted_apart():
    """A kernel with pass 1's loop (0x10-0x30), pass 2's column loop inside its block loop (0x50-0x80 in 0x40-0xa0)
    and a tail loop after the blocks (0xb0-0x100, larger than the column loop but run once): the hot loop is the
    column loop, nested deepest (taking the largest innermost loop would count the tail), its block loop adds
    three instructions, and ``first`` counts pass 1's loop.  The floors of the launch add the loops' floors."""
    from critscale.kernels.sass import Compiled, count_kernel, launch_floor

    assert count_hot_loop(FUSED)[0] == 4
    total, pipes, _ = count_hot_loop(FUSED, first=True)
    assert total == 3 and pipes == {"ALU": 2, "CTRL": 1}
    c = Compiled("k", FUSED, 32, 0, 0)
    k1 = count_kernel(c, "b", scores_per_iteration=1, first=True)
    k2 = count_kernel(c, "b", scores_per_iteration=2, scores_per_block=4)
    assert k1.per_score["total"] == 3 and k2.per_score["total"] == 4 / 2 + 3 / 4
    both = launch_floor([k1.__dict__, k2.__dict__])
    assert both["issue"] == pytest.approx((3 + 4 / 2 + 3 / 4) / 128) and both["MUFU"] == pytest.approx(0.5 / 16)
    with pytest.raises(ValueError, match="no loop before the hot loop"):
        count_hot_loop(LISTING, first=True)
