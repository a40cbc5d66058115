"""The GPU results of the book, as one suite of small modules (run by ``scripts/gpu_results.py``).

One job per module:

- :mod:`.env` — check ``critscale`` is installed, choose the device (CUDA, or the CPU smoke mode);
- :mod:`.provenance` — device, driver, versions, commit, date, and the clocks, power and temperature;
- :mod:`.table` — the declarative tables: kernel entry points, implementations, grids, sizes;
- :mod:`.work` — the baselines (eager, ``torch.compile``, ``logsumexp``, SDPA) and the fields each returns;
- :mod:`.reference` — the float64 reference error at every timed point;
- :mod:`.timing` — the timing protocol (CUDA events, median and interquartile range, profiler kernel time);
- :mod:`.floors` — measured ceilings and the floors per pipe (MUFU, FMA, ALU), bytes and tensor work;
- :mod:`.counters` — hardware counters (Nsight Compute) or compiled-code instruction counts;
- :mod:`.bench` — runs the table and writes ``kernels_bench.json`` / ``.csv``;
- :mod:`.cuda_tests` — the kernel tests with CUDA (``kernels_tests.json``);
- :mod:`.montecarlo` — the Monte-Carlo of the theory chapters with the sampled kernel;
- :mod:`.records` — writing JSON and CSV with their provenance.
"""
