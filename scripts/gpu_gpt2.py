"""Train a GPT-2-small-shaped model on the Python docs and run the attention diagnostic, on one GPU.

    python scripts/gpu_gpt2.py --out results/gpu --minutes 4

Runs unchanged on any CUDA machine with torch, transformers and critscale installed
(``pip install --no-deps --no-build-isolation -e .``); nothing is downloaded.  Steps:

1. build the corpus ``topics+code`` (CPython reference-manual topics and the standard library's
   source files of the interpreter that runs the script, about 12 MB; deterministic, hashed);
2. train ``GPT2LMHeadModel`` in the GPT-2-small shape (12 layers, 12 heads, width 768, context 1024,
   byte vocabulary) for ``--minutes`` of wall clock (bf16 autocast, AdamW, cosine schedule);
3. run the diagnostic of theory.md §6 P-13 on ``--windows`` windows of 1024 held-out tokens with the
   fused q·k kernel (``critscale.kernels.qk_row_stats``);
4. write ``gpt2_small_attention.json`` (provenance, config, training loss curve, per-head table,
   per-bin medians, entropy curves, profiles) and the same tables as CSV, plus ``summary.txt``.
   The weights are not kept.

Expected wall time on an H200: corpus and start-up < 0.5 min, training ``--minutes``, diagnostic ~1-3 min.
``--smoke`` runs a tiny model on the CPU for a few seconds (to check the script without a GPU).
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

RESULT_NAME = "gpt2_small_attention"


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory (e.g. results/gpu)")
    p.add_argument("--minutes", type=float, default=4.0, help="training wall-clock budget (default 4)")
    p.add_argument("--windows", type=int, default=8, help="held-out windows of --context tokens diagnosed (default 8)")
    p.add_argument("--corpus", default="topics+code", choices=("topics", "topics+docstrings", "topics+code"))
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--batch", type=int, default=16, help="sequences per step (default 16 x 1024 tokens)")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--seed", type=int, default=12697)
    p.add_argument("--smoke", action="store_true", help="tiny model on CPU for a few seconds (no GPU needed)")
    return p.parse_args(argv)


def _git_commit(root: Path) -> str:
    if os.environ.get("CRITSCALE_COMMIT"):  # a copy of the tree without .git (a GPU machine)
        return os.environ["CRITSCALE_COMMIT"]
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _driver() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


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

    from critscale.gpt2.corpus import build_corpus
    from critscale.gpt2.diagnose import diagnose, law_counts, summary_text
    from critscale.models.load import ByteTokenizer, LoadedModel, quiet_transformers
    from critscale.gpt2.train import TrainConfig, cache_key, train_model

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
        config = TrainConfig(n_layer=2, n_head=4, n_embd=64, n_positions=256, batch_size=8, steps=None,
                             minutes=min(args.minutes, 0.1), lr=3e-3, warmup_steps=5, seed=args.seed)
    else:
        config = TrainConfig(n_layer=args.layers, n_head=args.heads, n_embd=args.width, n_positions=args.context,
                             batch_size=args.batch, steps=None, minutes=args.minutes, lr=args.lr,
                             warmup_steps=100, weight_decay=0.1, seed=args.seed, log_every=25, eval_batches=16)
    model, log = train_model(config, corpus, device=device, progress=False)
    print(f"trained {log['steps']} steps in {log['train_seconds']:.0f} s; held-out "
          f"{log['heldout_bits_per_byte']:.3f} bits/byte", flush=True)
    name = (f"critscale GPT-2 ({config.n_layer}x{config.n_head}, width {config.n_embd}, context "
            f"{config.n_positions}) trained {log['steps']} steps on {corpus.source}, run {cache_key(config, corpus)}")
    loaded = LoadedModel(model.eval(), ByteTokenizer(), name, "trained in this run")
    t1 = time.perf_counter()
    heldout = corpus.heldout.decode("utf-8", errors="replace")
    kernel_error = None
    from critscale.gpt2.stats import kernel_available

    windows = args.windows
    if device == "cuda" and not kernel_available():
        kernel_error = "critscale.kernels.qk_row_stats is not importable here"
        windows = 2  # the float64 reference on the CPU takes ~0.3 s per head and window at n = 1024
        print(f"WARNING: {kernel_error}; diagnosing two windows with the float64 reference", file=sys.stderr)
    try:
        diag = diagnose(loaded, heldout, max_len=config.n_positions, max_windows=windows, progress=False,
                        seed=args.seed, backend="auto")
    except Exception as err:  # recorded in the results, never silent: the GPU time is too scarce to lose
        if device != "cuda":
            raise
        kernel_error = f"{type(err).__name__}: {err}"
        print(f"WARNING: the kernel backend failed ({kernel_error}); rerunning two windows with the float64 "
              "reference on the CPU", file=sys.stderr, flush=True)
        diag = diagnose(loaded, heldout, max_len=config.n_positions, max_windows=2, progress=False,
                        seed=args.seed, backend="reference")
    diag.meta["kernel_error"] = kernel_error
    diag_s = time.perf_counter() - t1
    summary = summary_text(diag)
    print(summary, flush=True)

    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "numpy": np.__version__, "python": platform.python_version()}
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        versions["triton"] = "not installed"
    root = Path(__file__).resolve().parents[1]
    provenance = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else f"CPU ({os.cpu_count()} cores), smoke run",
        "driver": _driver() if device == "cuda" else "none",
        "cuda": torch.version.cuda, "versions": versions, "commit": _git_commit(root),
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_time_s": round(time.perf_counter() - wall_start, 1),
        "corpus_seconds": round(corpus_s, 1), "train_seconds": log["train_seconds"],
        "diagnose_seconds": round(diag_s, 1), "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
        "smoke": bool(args.smoke),
    }
    result = {
        "provenance": provenance,
        "checkpoint": name,
        "model": loaded.describe(),
        "train_config": config.as_dict(),
        "corpus": {"source": corpus.source, "sha256": corpus.sha256, "description": corpus.describe()},
        "training": {k: log[k] for k in ("steps", "train_seconds", "loss_curve", "final_train_loss",
                                          "heldout_loss_nats_per_byte", "heldout_bits_per_byte")},
        "diagnose": diag.meta,
        "law_counts": law_counts(diag),
        "heads": diag.heads.to_dict(orient="records"),
        "bins": diag.bins.to_dict(orient="records"),
        "entropy_curves": diag.curves.to_dict(orient="records"),
        "profiles": diag.profiles.to_dict(orient="records"),
    }
    from critscale.pagedata import _json_safe, plain

    (out / f"{RESULT_NAME}.json").write_text(json.dumps(_json_safe(plain(result)), indent=1))
    diag.heads.to_csv(out / f"{RESULT_NAME}_heads.csv", index=False)
    diag.bins.to_csv(out / f"{RESULT_NAME}_bins.csv", index=False)
    (out / f"{RESULT_NAME}_summary.txt").write_text(summary + "\n")
    print(f"wrote {out / (RESULT_NAME + '.json')} ({provenance['wall_time_s']:.0f} s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
