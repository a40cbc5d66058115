"""Train a GPT-2-small-shaped model on the Python docs and run the calibrated attention diagnostic, on one GPU.

    python scripts/gpu_gpt2.py --out results/gpu --minutes 4

Runs unchanged on any CUDA machine with torch, transformers and critscale installed
(``pip install --no-deps --no-build-isolation -e .``); nothing is downloaded.  Steps:

1. build the corpus ``topics+code`` (CPython reference-manual topics and the standard library's
   source files of the interpreter that runs the script, about 12 MB; deterministic, hashed);
2. save the step-0 model (the seeded initialisation of the GPT-2-small shape: 12 layers, 12 heads,
   width 768, context 1024, byte vocabulary), then train the same initialisation for ``--minutes``
   of wall clock (bf16 autocast, AdamW, cosine schedule);
3. run the diagnostic (:mod:`critscale.diagnostic`, theory.md §6 P-13) on both models: ``--windows``
   held-out windows of 1024 tokens, the suffix design (the last 4 tokens of each window seen with
   contexts of 32 to 1024 tokens), every null head over the same design, the fused q·k kernel
   (``critscale.kernels.qk_row_stats``) for the heads and the q/k nulls;
4. write ``gpt2_small_diagnostic.json`` (provenance, configuration, training loss curve and, per
   model, the per-head table, the null table, per-length medians, entropy curves, profiles) and the
   head and null tables as CSV, plus ``gpt2_small_diagnostic_summary.txt``.  No weights are kept.

Expected wall time on an H200: corpus and start-up < 0.5 min, training ``--minutes``, the two diagnoses
a few minutes.  ``--smoke`` runs a tiny model on the CPU (to check the script without a GPU).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

RESULT_NAME = "gpt2_small_diagnostic"


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory (e.g. results/gpu)")
    p.add_argument("--minutes", type=float, default=4.0, help="training wall-clock budget (default 4)")
    p.add_argument("--windows", type=int, default=32, help="held-out windows of --context tokens diagnosed (default 32)")
    p.add_argument("--corpus", default="topics+code", choices=("topics", "topics+docstrings", "topics+code"))
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--batch", type=int, default=16, help="sequences per step (default 16 x 1024 tokens)")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--seed", type=int, default=12697)
    p.add_argument("--smoke", action="store_true", help="tiny model on CPU (no GPU needed)")
    return p.parse_args(argv)


def _driver() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def _diagnose(loaded, tokens, args, windows: int, length: int, device: str) -> tuple[object, str | None]:
    """The diagnosis with the kernel on CUDA; if the kernel fails, the float64 reference, and the error."""
    from critscale.diagnostic import diagnose_model

    options = dict(max_len=length, max_windows=windows, seed=args.seed)
    if args.smoke:
        options["null_windows"] = 8
    try:
        return diagnose_model(loaded, tokens, backend="auto", **options), None
    except Exception as err:  # recorded in the results, never silent: the GPU time is too scarce to lose
        if device != "cuda":
            raise
        error = f"{type(err).__name__}: {err}"
        print(f"WARNING: the kernel backend failed ({error}); rerunning with the float64 reference",
              file=sys.stderr, flush=True)
        return diagnose_model(loaded, tokens, backend="reference", **options), error


def _tables(diag) -> dict:
    return {"meta": diag.meta, "heads": diag.heads.to_dict(orient="records"),
            "nulls": diag.nulls.to_dict(orient="records"), "bins": diag.bins.to_dict(orient="records"),
            "entropy_curves": diag.curves.to_dict(orient="records"),
            "profiles": diag.profiles.to_dict(orient="records")}


def main(argv=None) -> int:
    args = _args(argv)
    wall_start = time.perf_counter()
    import torch

    if not torch.cuda.is_available():
        if not args.smoke:
            print("gpu_gpt2.py: no CUDA device; use --smoke to check the script on CPU", file=sys.stderr)
            return 2
        os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import transformers

    from critscale import provenance
    from critscale.diagnostic.report import law_counts, regime_counts, summary_text
    from critscale.gpt2.corpus import build_corpus, byte_tokens
    from critscale.gpt2.train import TrainConfig, cache_key, train_model
    from critscale.models.load import ByteTokenizer, LoadedModel, quiet_transformers

    quiet_transformers()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    t0 = time.perf_counter()
    corpus = build_corpus("topics" if args.smoke else args.corpus)
    corpus_s = time.perf_counter() - t0
    print(corpus.describe(), f"({corpus_s:.1f} s)", flush=True)
    if args.smoke:
        shape = dict(n_layer=2, n_head=4, n_embd=64, n_positions=128, batch_size=8, lr=3e-3, warmup_steps=5)
        windows = min(args.windows, 8)
    else:
        shape = dict(n_layer=args.layers, n_head=args.heads, n_embd=args.width, n_positions=args.context,
                     batch_size=args.batch, lr=args.lr, warmup_steps=100, weight_decay=0.1, log_every=25,
                     eval_batches=16)
        windows = args.windows
    minutes = min(args.minutes, 0.1) if args.smoke else args.minutes
    step0_config = TrainConfig(**shape, steps=0, seed=args.seed)
    config = TrainConfig(**shape, steps=None, minutes=minutes, seed=args.seed)
    tokens = byte_tokens(corpus.heldout)
    length = config.n_positions
    results, summaries, timings = {}, [], {"corpus_seconds": round(corpus_s, 1)}
    for label, train_config in (("step0", step0_config), ("trained", config)):
        model, log = train_model(train_config, corpus, device=device, progress=False)
        print(f"{label}: {log['steps']} steps in {log['train_seconds']:.0f} s; held-out "
              f"{log['heldout_bits_per_byte']:.3f} bits/byte", flush=True)
        name = (f"critscale GPT-2 ({train_config.n_layer}x{train_config.n_head}, width {train_config.n_embd}, "
                f"context {length}) {'at its seeded initialisation (step 0)' if label == 'step0' else 'trained'} "
                f"{log['steps']} steps on {corpus.source}, run {cache_key(train_config, corpus)}")
        loaded = LoadedModel(model.eval(), ByteTokenizer(), name, "built in this run")
        t1 = time.perf_counter()
        diag, kernel_error = _diagnose(loaded, tokens, args, windows, length, device)
        timings[f"{label}_train_seconds"] = log["train_seconds"]
        timings[f"{label}_diagnose_seconds"] = round(time.perf_counter() - t1, 1)
        summary = summary_text(diag)
        print(summary, flush=True)
        summaries.append(f"=== {label}: {name}\n{summary}")
        results[label] = {
            "checkpoint": name, "model": loaded.describe(), "train_config": train_config.as_dict(),
            "training": {k: log[k] for k in ("steps", "train_seconds", "loss_curve", "final_train_loss",
                                              "heldout_loss_nats_per_byte", "heldout_bits_per_byte")},
            "kernel_error": kernel_error, "law_counts": law_counts(diag), "regime_counts": regime_counts(diag),
            **_tables(diag)}
        diag.heads.to_csv(out / f"{RESULT_NAME}_{label}_heads.csv", index=False)
        diag.nulls.to_csv(out / f"{RESULT_NAME}_{label}_nulls.csv", index=False)
        del model, loaded
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "numpy": np.__version__, "python": platform.python_version()}
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        versions["triton"] = "not installed"
    result = {
        "provenance": {
            "device": torch.cuda.get_device_name(0) if device == "cuda" else f"CPU ({os.cpu_count()} cores), smoke run",
            "driver": _driver() if device == "cuda" else "none", "cuda": torch.version.cuda, "versions": versions,
            "commit": provenance.git_commit(),
            "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "wall_time_s": round(time.perf_counter() - wall_start, 1), **timings,
            "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]), "smoke": bool(args.smoke)},
        "corpus": {"source": corpus.source, "sha256": corpus.sha256, "description": corpus.describe()},
        **results,
    }
    from critscale.pagedata import _json_safe, plain

    (out / f"{RESULT_NAME}.json").write_text(json.dumps(_json_safe(plain(result)), indent=1))
    (out / f"{RESULT_NAME}_summary.txt").write_text("\n\n".join(summaries) + "\n")
    print(f"wrote {out / (RESULT_NAME + '.json')} ({result['provenance']['wall_time_s']:.0f} s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
