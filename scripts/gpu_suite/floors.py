"""Ceilings measured in the run, and each point's floors per pipe, bytes and tensor work.

Ceilings (measured now, on this device):

- HBM: a 4 GiB device-to-device copy, bytes read plus written per second;
- tensor cores: an 8192^3 bf16 product of random matrices;
- MUFU: ``critscale.kernels.ceilings.exp2_chains`` (independent ``ex2`` chains): MUFU.EX2 per second;
- FMA pipe: ``fma_chains`` measures fp32 flop/s, two flops per FFMA, so FFMA instructions per second are
  half of it (the FMA floor divides FMA-pipe *instructions* by this instruction rate);
- ALU pipe and instruction issue: not measured by a micro-kernel; the per-clock rates of compute
  capability 9.0 (CUDA C++ Programming Guide, arithmetic instruction throughput: 64 results per clock
  per SM for 32-bit compares, min/max and logic; four warp-instructions issued per clock per SM) times
  the SM clock read during the run.  ``rate_source`` says so next to each.

Floors of a point (the fewest instructions of the kernels' algorithm, the beta ladder of
``critscale.kernels.ladder``; the counters say what the compiled code actually issues):

- MUFU: one ``ex2`` per score and ladder root (a doubling chain of the grid: 8 for 32 betas of ratio
  ``2^{1/8}``), plus, for the sampled kind, three per Box–Muller pair and pass (``sqrt``, ``cos``, ``sin``:
  1.5 per score; the logarithm of the uniform is libdevice's accurate one, not MUFU);
- FMA pipe: per score and root, the exponent's multiply, one add to ``A`` per level and one squaring per level
  above the root, the last squaring fused with its add (one FFMA ``acc + w w``); one FFMA of ``B`` per requested
  positive beta;
- ALU pipe: the gap's thermometer word from the word table (a shift, a clamp, a compare and a select per
  32 bits of the 64-bit word) and its addition into the bit-sliced block counter (three carry-save adders per
  four words and the carry up the three further low planes, two logic instructions each per 32 bits), the
  same for any number of thresholds (``critscale.kernels.counting``);
- issue: all of the above, at four warp-instructions per clock per SM;
- HBM: one read of what the kind reads (stored scores: 4 bytes each; ``q`` and ``k`` once; nothing);
- tensor: ``2 rows n d`` flops of the one product ``q k^T`` (qk).
"""

from __future__ import annotations

ARCH_RATES = {"alu_per_clock_per_sm": 64, "issue_warp_instr_per_clock_per_sm": 4}
ARCH_SOURCE = "CUDA C++ Programming Guide, arithmetic instruction throughput, compute capability 9.0"
GENERATION_MUFU = 1.5  # per generated score and pass: sqrt, cos, sin per Box-Muller pair of Gaussians
COUNT_ALU = 12  # per score: the word (shift, clamp, compare, two selects) and the counter (3/4 x 2 x 2 + 4 x 2 x 2 / 4)


def measure_ceilings(run) -> dict:
    """The ceilings above, measured now (made-up values, labelled, in the CPU smoke run)."""
    from .provenance import device_state

    if run.smoke:
        return {"copy_bandwidth_Bps": 1e10, "bf16_matmul_flops": 1e12, "exp2_per_s": 1e10, "ffma_per_s": 5e10,
                "alu_per_s": 5e10, "issue_warp_instr_per_s": 4e9, "sm_clock_mhz": None,
                "rate_source": {"all": "cpu smoke: made-up ceilings, to exercise the code"}}
    import torch

    from critscale.kernels.ceilings import exp2_chains, fma_chains

    from .timing import event_times, summarize

    def median_ms(fn, reps=20):
        fn()
        return summarize(event_times(fn, reps), "")["median"]

    out = {}
    src = torch.empty(2**30, dtype=torch.float32, device="cuda")  # 4 GiB
    src.uniform_()
    dst = torch.empty_like(src)
    out["copy_bandwidth_Bps"] = 2 * src.numel() * 4 / (median_ms(lambda: dst.copy_(src)) * 1e-3)
    del src, dst
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    out["bf16_matmul_flops"] = 2 * 8192**3 / (median_ms(lambda: a @ b) * 1e-3)
    del a, b
    n, iters = 2**24, 256
    x = torch.rand(n, device="cuda")
    o = torch.empty_like(x)
    grid = (n // 1024,)
    out["exp2_per_s"] = 4 * iters * n / (median_ms(lambda: exp2_chains[grid](x, o, ITERS=iters, BLOCK=1024)) * 1e-3)
    fma_flops = 2 * 4 * iters * n / (median_ms(lambda: fma_chains[grid](x, o, ITERS=iters, BLOCK=1024)) * 1e-3)
    state = device_state()  # the clock right after a busy kernel
    out["fp32_fma_flops"] = fma_flops
    out["ffma_per_s"] = fma_flops / 2  # two flops per FFMA instruction
    clock = state.get("sm_clock_mhz")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out["sm_clock_mhz"] = clock
    out["multiprocessors"] = sms
    if clock:
        out["alu_per_s"] = ARCH_RATES["alu_per_clock_per_sm"] * sms * clock * 1e6
        out["issue_warp_instr_per_s"] = ARCH_RATES["issue_warp_instr_per_clock_per_sm"] * sms * clock * 1e6
    out["rate_source"] = {
        "copy_bandwidth_Bps": "measured: 4 GiB dst.copy_(src), bytes read + written, median of 20",
        "bf16_matmul_flops": "measured: 8192^3 bf16 random matrices, median of 20",
        "exp2_per_s": "measured: critscale.kernels.ceilings.exp2_chains (MUFU.EX2), median of 20",
        "ffma_per_s": "measured: critscale.kernels.ceilings.fma_chains flop/s over 2 flops per FFMA",
        "alu_per_s": f"{ARCH_SOURCE} x SMs x SM clock read after the FMA micro-kernel"
                     + ("" if clock else ": no clock reading, so no ALU floor"),
        "issue_warp_instr_per_s": f"{ARCH_SOURCE}: 4 warp-instructions per clock per SM x SMs x SM clock",
    }
    return out


def ladder_instructions(beta) -> dict:
    """MUFU and FMA-pipe instructions per score of the beta ladder on the grid ``beta``."""
    import numpy as np

    from critscale.kernels.ladder import beta_plan

    plan = beta_plan(np.asarray(beta, dtype=np.float64))
    roots, levels = len(plan.roots), plan.levels
    b_sums = len({int(a) for a in plan.a_slot if a >= 0})
    return {"ex2": roots, "fma": roots * (2 * levels - 1) + b_sums}


def work_model(kind: str, rows: int, n: int, beta, n_t: int, d: int) -> dict:
    """The fewest instructions per pipe (thread-level), bytes and tensor flops of one call on the grid ``beta``."""
    scores = rows * n
    lad = ladder_instructions(beta)
    work = {"scores": scores, "mufu_instr": scores * lad["ex2"], "fma_instr": scores * lad["fma"],
            "alu_instr": scores * COUNT_ALU if n_t else 0, "hbm_bytes": 0, "tensor_flops": 0}
    if kind == "scores":
        work["hbm_bytes"] = 4 * scores
    elif kind == "qk":
        work["hbm_bytes"] = 2 * (rows + n) * d
        work["tensor_flops"] = 2 * scores * d
    elif kind == "sampled":
        work["mufu_instr"] += 2 * GENERATION_MUFU * scores
    return work


def floors(work: dict, ceilings: dict) -> dict:
    """Seconds each limit alone would take (None where its rate is unknown) and the largest."""
    issue_rate = ceilings.get("issue_warp_instr_per_s")
    out = {
        "mufu": work["mufu_instr"] / ceilings["exp2_per_s"],
        "fma": work["fma_instr"] / ceilings["ffma_per_s"],
        "alu": work["alu_instr"] / ceilings["alu_per_s"] if ceilings.get("alu_per_s") else None,
        "issue": ((work["mufu_instr"] + work["fma_instr"] + work["alu_instr"]) / 32 / issue_rate
                  if issue_rate else None),
        "hbm": work["hbm_bytes"] / ceilings["copy_bandwidth_Bps"],
        "tensor": work["tensor_flops"] / ceilings["bf16_matmul_flops"],
    }
    known = {k: v for k, v in out.items() if v is not None}
    largest = max(known, key=known.get)
    return {"seconds": out, "largest": largest, "floor_s": known[largest]}
