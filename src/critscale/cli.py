"""Command line of critscale: ``python -m critscale diagnose``.

``diagnose`` runs the calibrated attention diagnostic (:mod:`critscale.diagnostic`; theory.md §6
P-13) on a model and a text (``--model``, ``--text``) or on queries and keys from a file
(``--qk FILE.npz``), beside null heads whose answer is known by construction.  It writes tables,
a summary and figures into a fresh run directory ``--out`` (see docs/diagnostic.md) and prints the summary.
Exit status: 0 on success, 2 with one line naming the problem for every refused input, 130 when interrupted.

Inputs are checked before any computation where they can be: the options (an option of ``--text``
given with ``--qk`` is refused, not ignored), the output directory, the device, the input paths.
Status 2 also covers a path the system refuses (a full disk, a read-only directory, a name too
long): the line names the path and the problem.
SIGINT (Ctrl-C) prints the one line ``interrupted``, status 130.
Nothing is printed before the error line: the warnings of a run are held back and shown only when it
succeeds, and the progress bar is drawn only when stderr is a terminal.
Any other exception is a fault of critscale: its traceback, status 1.
A run that fails for any reason leaves no run directory it created, and an existing one as it was.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings


class DeviceError(ValueError):
    """``--device`` names no usable device."""


class UsageError(ValueError):
    """The command line does not parse (an unknown option, a missing or malformed value)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (:class:`UsageError`), not a usage block and an exit."""

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")


TEXT_ONLY = (("model", "--model"), ("design", "--design"), ("encoding", "--encoding"), ("errors", "--errors"),
             ("max_len", "--max-len"), ("max_windows", "--max-windows"), ("device", "--device"),
             ("device_map", "--device-map"))
"""Options of a model reading a text: refused with ``--qk``, which holds the queries and keys already."""
DEFAULTS = {"design": "suffix", "encoding": "utf-8", "errors": "strict", "max_windows": 32}
"""Values of the options of :data:`TEXT_ONLY` when not given (their parser default is None, to tell)."""
ERROR_HANDLERS = ("strict", "replace", "ignore")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m critscale",
                     description="critscale: critical scaling of inverse temperature in attention")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("diagnose", help="the calibrated accumulation-scale diagnostic of attention rows",
                       description=__doc__.split("\n\n")[1])
    source = d.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="text file the model reads (streamed: only the tokens analysed are read)")
    source.add_argument("--qk", help=".npz file with arrays q, k (layers, heads, windows, T, d_head), optional "
                                     "scale and causal")
    d.add_argument("--model", default=None,
                   help="with --text: hub name (needs the hub cache when HF_HUB_OFFLINE=1), a directory written by "
                        "save_pretrained, or what critscale.models accepts; default: $CRITSCALE_GPT2")
    d.add_argument("--out", required=True, help="run directory: created, or empty, or an earlier run's with --force")
    d.add_argument("--force", action="store_true", help="replace the results of an earlier diagnosis in --out")
    d.add_argument("--max-len", type=int, default=None,
                   help="with --text: window length in tokens (default: min(1024, the model's context))")
    d.add_argument("--max-windows", type=int, default=None,
                   help="with --text: consecutive windows analysed (default 32)")
    d.add_argument("--queries", type=int, default=4, help="query rows kept per context length (default 4)")
    d.add_argument("--design", default=None, choices=("suffix", "prefix"),
                   help="with --model: contexts of growing length ending at fixed query tokens (suffix, default) "
                        "or the prefixes of one forward per window (prefix, the design of --qk files)")
    d.add_argument("--nulls", default=None, help="comma-separated null heads (default: all; see docs/diagnostic.md)")
    d.add_argument("--null-windows", type=int, default=None,
                   help="windows of each null head (default: 4 x the input's windows, at least 32)")
    d.add_argument("--encoding", default=None, help="encoding of --text (default utf-8)")
    d.add_argument("--errors", default=None, choices=ERROR_HANDLERS,
                   help="what to do with bytes --encoding cannot decode: strict (an error naming the byte offset, "
                        "default), replace or ignore")
    d.add_argument("--device", default=None,
                   help="with --text: torch device for the model (default: cuda if available, else cpu)")
    d.add_argument("--device-map", default=None,
                   help="with --text: transformers device map for a model larger than one device (e.g. auto; "
                        "needs accelerate)")
    d.add_argument("--backend", default="auto", choices=("auto", "reference", "kernel"),
                   help="row statistics: the fused q.k kernel (CUDA), the float64 reference (CPU), or auto "
                        "(kernel on CUDA, else reference)")
    d.add_argument("--seed", type=int, default=0, help="seed of the null heads and the bootstrap, >= 0 (default 0)")
    d.add_argument("--no-figures", action="store_true", help="write the tables only")
    d.add_argument("--rows", action="store_true", help="also write every analysed row (rows.csv.gz)")
    d.add_argument("--no-progress", action="store_true",
                   help="no progress bar (there is one only when stderr is a terminal)")
    return parser


def check_device(name: str | None) -> str:
    """The torch device to use: ``name`` validated, or cuda when available, else cpu."""
    import torch

    if name is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise DeviceError(f"--device {name} is not a torch device (use cpu, cuda or cuda:N)") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"--device {name}: no CUDA GPU is available on this machine (use --device cpu)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif device.type != "cpu":
        raise DeviceError(f"--device {name}: the diagnostic runs on cpu or cuda, not {device.type}")
    return str(device)


def _resolve_defaults(args) -> None:
    """Refuse the options of :data:`TEXT_ONLY` given with ``--qk``; fill in their defaults otherwise."""
    if args.qk is not None:
        given = [flag for name, flag in TEXT_ONLY if getattr(args, name) is not None]
        if given:
            others = ", ".join(flag for _, flag in TEXT_ONLY[2:])
            raise ValueError(f"--qk files hold one forward per window (prefix design): --model and --design do not "
                             f"apply, nor the other options of --text ({others}); given: {', '.join(given)}")
    for name, value in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if not sys.stderr.isatty():
        args.no_progress = True  # a bar in a log or a pipe is noise, and it would precede an error line


def _check_options(args) -> tuple[str, ...]:
    from .diagnostic import nulls as nulls_module
    from .diagnostic.design import DesignError, make_design

    if args.seed < 0:
        raise DesignError(f"--seed must be >= 0, got {args.seed}")
    if args.max_windows < 1:
        raise DesignError(f"--max-windows must be >= 1, got {args.max_windows}")
    if args.max_len is not None:
        make_design(args.design, args.max_len, queries=args.queries)  # names a --max-len below MIN_LENGTH
    elif not 1 <= args.queries <= 16:
        raise DesignError(f"--queries must be from 1 to 16, got {args.queries}")
    if args.null_windows is not None and args.null_windows < 1:
        raise DesignError(f"--null-windows must be >= 1, got {args.null_windows}")
    names = nulls_module.DEFAULT_NULLS if args.nulls is None else tuple(
        n.strip() for n in args.nulls.split(",") if n.strip())
    return nulls_module.check_names(names)


def _compute(args, nulls, device: str, backend: str):
    """Load the input, run the diagnostic; returns the diagnosis and the inputs with their hashes."""
    from .diagnostic import diagnose_model, diagnose_qk
    from .diagnostic.rundir import describe_input

    common = dict(queries=args.queries, nulls=nulls, null_windows=args.null_windows, seed=args.seed,
                  backend=backend, keep_rows=args.rows)
    if args.qk is not None:
        from .diagnostic.qkfile import load_qk_file

        arrays = load_qk_file(args.qk)
        diag = diagnose_qk(arrays.q, arrays.k, arrays.scale, arrays.causal, **common)
        return diag, [describe_input("qk", args.qk)]
    from .diagnostic.pipeline import resolve_length
    from .diagnostic.text import read_tokens
    from .models import load_model

    options = {"device": device}
    if args.device_map is not None:
        options["device_map"] = args.device_map
    loaded = load_model(args.model, **options)
    length = resolve_length(loaded.context, args.max_len)
    text = read_tokens(args.text, loaded.tokenizer, args.max_windows * length, encoding=args.encoding,
                       errors=args.errors)
    inputs = [{"role": "text", "path": args.text, "file_bytes": os.path.getsize(args.text),
               "bytes_read": text.bytes_read, "sha256": text.sha256,
               "sha256_of": "the bytes read (the text is streamed; nothing after them was read)"},
              describe_input("model", loaded.checkpoint, **loaded.record_fields())]
    diag = diagnose_model(loaded, text.tokens, max_len=length, max_windows=args.max_windows, design=args.design,
                          progress=not args.no_progress, **common)
    return diag, inputs


def _diagnose(args, argv) -> int:
    from .diagnostic.rundir import check_out_dir

    _resolve_defaults(args)
    if args.text is not None:  # before the slow imports
        from .diagnostic.text import check_codec, check_text_path

        check_text_path(args.text)
        check_codec(args.encoding, args.errors)
    nulls = _check_options(args)
    from .triton_backend import choose

    choose()  # before transformers imports triton
    device = check_device(args.device)
    from .diagnostic.rows import resolve_backend

    backend = resolve_backend(args.backend)
    out_path = os.path.expanduser(args.out) if args.out else args.out
    created = bool(out_path) and not _lexists(out_path)
    out = check_out_dir(args.out, force=args.force)
    try:
        diag, manifest, written = _run(args, argv, nulls, device, backend, out)
    except BaseException:
        if created:
            _remove_if_empty(out)  # the outputs' staging folder is gone already: nothing of this run is left
        raise
    from .diagnostic.report import summary_text

    print(summary_text(diag, manifest))
    print(f"\nwrote {len(written)} files to {out}: " + ", ".join(p.name for p in written))
    return 0


def _run(args, argv, nulls, device, backend, out):
    """Compute the diagnosis and write it into ``out``; returns the diagnosis, its manifest and the paths."""
    from .diagnostic.report import write_outputs
    from .diagnostic.rundir import run_manifest

    diag, inputs = _compute(args, nulls, device, backend)
    manifest = run_manifest(argv, inputs)
    written = write_outputs(diag, out, manifest=manifest, figures=not args.no_figures, rows=args.rows)
    return diag, manifest, written


def _lexists(path) -> bool:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # check_out_dir names the problem
    return True


def _remove_if_empty(out) -> None:
    try:
        out.rmdir()
    except OSError:
        pass  # something not of this run is there: it stays


def _one_line(err: BaseException) -> str:
    """The message of ``err`` on one line; an OSError names its path(s) and the problem."""
    from .diagnostic.rundir import shown

    if isinstance(err, OSError) and err.strerror:
        paths = [shown(p) for p in (err.filename, err.filename2) if p is not None]
        text = f"{' -> '.join(paths)}: {err.strerror}" if paths else err.strerror
    elif isinstance(err, MemoryError):
        text = "out of memory" + (f": {err}" if str(err) else " (give fewer windows, nulls or a smaller input)")
    else:
        text = str(err) or type(err).__name__
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def main(argv=None) -> int:
    """Entry point; returns the exit status (0 success, 2 refused input, 130 interrupted)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    name = "critscale diagnose" if argv[:1] == ["diagnose"] else "critscale"
    try:
        with warnings.catch_warnings(record=True) as held:  # shown only after a run that succeeds
            args = _parser().parse_args(argv)
            status = _diagnose(args, argv) if args.command == "diagnose" else 1
        for w in held:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
        return status
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError, MemoryError) as err:  # every documented input error is a ValueError subclass
        print(f"{name}: error: {_one_line(err)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
