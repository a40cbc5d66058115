"""Command line of critscale: ``python -m critscale diagnose --model NAME_OR_DIR --text FILE --out DIR``.

``diagnose`` runs the paper's diagnostic (theory.md §6 P-13) on a GPT-2-family model: per layer and
head, kappa, kappa_16 and beta_{1/2} against the row length n, the exponent gamma of
kappa ∝ (log n)^gamma, the shape of log N(t), sinks, operating points and the rescaling-rule audit.
It writes ``heads.csv`` (one line per head), ``bins.csv``, ``entropy_curves.csv``,
``profiles.csv``, ``summary.json``, ``summary.txt`` and PNG figures into ``--out``, and prints
the summary.  Exit status 2 with a one-line message for bad input (missing model, unsupported
architecture, bad checkpoint, missing/empty/too-short text, bad ``--max-len``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m critscale",
                                     description="critscale: critical scaling of inverse temperature in attention")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("diagnose", help="the accumulation-scale diagnostic of a GPT-2 model's attention rows",
                       description=__doc__.split("\n\n")[1])
    d.add_argument("--model", default=None,
                   help="hub name (e.g. gpt2; needs the hub cache when HF_HUB_OFFLINE=1) or a directory written "
                        "by save_pretrained; default: $CRITSCALE_GPT2")
    d.add_argument("--text", required=True, help="UTF-8 text file to run the model on")
    d.add_argument("--max-len", type=int, default=None,
                   help="window length in tokens (default: min(1024, the model's context))")
    d.add_argument("--max-windows", type=int, default=8, help="number of consecutive windows analysed (default 8)")
    d.add_argument("--out", required=True, help="output directory (created)")
    d.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    d.add_argument("--backend", default="auto", choices=("auto", "reference", "kernel"),
                   help="row statistics: the fused q.k kernel (CUDA), the float64 reference (CPU), or auto "
                        "(kernel on CUDA, else reference)")
    d.add_argument("--seed", type=int, default=0, help="seed of the bootstrap intervals (default 0)")
    d.add_argument("--no-figures", action="store_true", help="write the tables only")
    d.add_argument("--rows", action="store_true", help="also write every analysed row (rows.csv.gz)")
    d.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _diagnose(args) -> int:
    if not Path(args.text).is_file():  # before the slow imports
        raise ValueError(f"text file {args.text} does not exist")
    import torch

    if not torch.cuda.is_available():
        # Triton (imported by transformers) has no CPU backend: it needs its interpreter on CPU.
        os.environ.setdefault("TRITON_INTERPRET", "1")

    from .gpt2.diagnose import diagnose, read_text, summary_text, write_outputs
    from .models.load import load_model

    text = read_text(args.text)  # fail on a missing file before loading the model
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    loaded = load_model(args.model, device=device)
    diag = diagnose(loaded, text, max_len=args.max_len, max_windows=args.max_windows,
                    progress=not args.no_progress, seed=args.seed, backend=args.backend)
    written = write_outputs(diag, args.out, figures=not args.no_figures, rows=args.rows)
    print(summary_text(diag))
    print(f"\nwrote {len(written)} files to {args.out}: " + ", ".join(p.name for p in written))
    return 0


def main(argv=None) -> int:
    """Entry point; returns the exit status (0 success, 2 bad input)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "diagnose":
            return _diagnose(args)
    except ValueError as err:  # every documented input error is a ValueError subclass
        print(f"critscale {args.command}: error: {err}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
