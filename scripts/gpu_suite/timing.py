"""The timing protocol: end-to-end CUDA-event times and profiler kernel time of one callable.

End to end: each repetition is bracketed by CUDA events on the current stream, after an L2 flush
(a 256 MiB write, as ``triton.testing.do_bench`` does), so host work inside the call (syncs, grid
uploads, float64 finishing) counts as the GPU timeline sees it.  Every call gets at least
``MIN_REPS`` = 10 repetitions; fast calls get more, up to the point's time budget or ``MAX_REPS``.
Reported: median, interquartile range (25th and 75th percentiles), minimum, repetitions.

Kernel only: ``torch.profiler`` with CUDA activity over ``PROFILE_REPS`` calls; the device time of
every kernel (and memory operation) the call launched, summed, per call; the largest kernels by name.

The caller warms up first (compilation, autotuning) and measures the peak extra memory of that call.
"""

from __future__ import annotations

import time

import numpy as np

MIN_REPS = 10
MAX_REPS = 200
PROFILE_REPS = 3
FLUSH_BYTES = 256 * 2**20
_FLUSH = {}


def _flush_l2() -> None:
    import torch

    if "buf" not in _FLUSH:
        _FLUSH["buf"] = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    _FLUSH["buf"].zero_()


def summarize(times_ms: list[float], method: str) -> dict:
    t = np.asarray(times_ms, dtype=float)
    q25, med, q75 = np.percentile(t, [25, 50, 75])
    return {"median": float(med), "q25": float(q25), "q75": float(q75), "min": float(t.min()),
            "reps": int(len(t)), "method": method}


def event_times(fn, reps: int) -> list[float]:
    import torch

    times = []
    for _ in range(reps):
        _flush_l2()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return times


def time_call(fn, run, budget_s: float) -> dict:
    """End-to-end time of ``fn()`` (already warmed up): ``summarize`` of the repetitions."""
    if run.smoke:
        t0 = time.perf_counter()
        fn()
        return summarize([1e3 * (time.perf_counter() - t0)],
                         "cpu smoke: one perf_counter timing of the interpreter (not a GPU measurement)")
    est = event_times(fn, 1)[0]
    reps = int(max(MIN_REPS, min(MAX_REPS, budget_s * 1e3 / max(est, 1e-3))))
    return summarize(event_times(fn, reps), f"CUDA events around each call after an L2 flush, {reps} repetitions")


def kernel_time(fn, run) -> dict:
    """Device time of the kernels one call launches (torch.profiler), with the largest by name."""
    if run.device != "cuda":
        return {"status": "not measured: the CPU smoke run launches no CUDA kernels"}
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILE_REPS):
            fn()
        torch.cuda.synchronize()
    by_name: dict[str, float] = {}
    for ev in prof.events():
        if ev.device_type == DeviceType.CUDA:
            by_name[ev.name] = by_name.get(ev.name, 0.0) + ev.time_range.elapsed_us() / 1e3 / PROFILE_REPS
    if not by_name:
        return {"status": "error: the profiler recorded no CUDA activity for this call"}
    largest = dict(sorted(by_name.items(), key=lambda kv: -kv[1])[:6])
    return {"status": "ok", "ms": float(sum(by_name.values())), "largest_ms": largest, "reps": PROFILE_REPS,
            "method": "torch.profiler CUDA activity: kernels and memory operations, summed, per call"}


def peak_extra_bytes(fn, run):
    """(result of one call, peak device memory it allocated beyond what was allocated before)."""
    import torch

    if run.device != "cuda":
        return fn(), None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    return out, int(torch.cuda.max_memory_allocated() - base)
