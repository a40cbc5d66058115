"""Where Triton runs critscale's kernels in a process: on CUDA, or in Triton's CPU interpreter.

Triton has no CPU backend: without a GPU its kernels run in its interpreter, which is switched on by
``TRITON_INTERPRET=1`` and must be set before ``triton`` is first imported (``transformers`` and
``torch.compile`` import it too; triton-lang/triton#5142).  :func:`choose` is the one place that decides;
the kernels package, the command line, the tests, the build and the GPU scripts all call it, and the value
it sets in the environment reaches every child process::

    python -m critscale.triton_backend      # prints 1 (interpreter) or 0 (CUDA), as choose() decides here
"""

from __future__ import annotations

import os
import sys

VARIABLE = "TRITON_INTERPRET"


def _cuda_device() -> bool:
    import torch

    return torch.cuda.is_available()


def choose(interpreter: bool | None = None, *, when_unset: bool | None = None) -> bool:
    """Set ``TRITON_INTERPRET`` for this process and its children; return True when the interpreter runs.

    ``interpreter`` given: that choice.  Otherwise an explicit ``TRITON_INTERPRET`` of ``0`` or ``1`` stands,
    and when it is unset (or empty) ``when_unset`` decides, or else the interpreter runs exactly when torch
    sees no CUDA device.  ``0`` without CUDA is kept: it compiles kernels without running them
    (``critscale.kernels.sass``).  Raises :class:`ValueError` for another value of the variable and
    :class:`RuntimeError` when triton was already imported with the other choice, which it cannot change.
    """
    value = os.environ.get(VARIABLE) or None
    if value not in (None, "0", "1"):
        raise ValueError(f"{VARIABLE}={value!r}: use 1 (Triton's CPU interpreter) or 0 (CUDA)")
    if interpreter is None:
        if value is not None:
            interpreter = value == "1"
        elif when_unset is not None:
            interpreter = when_unset
        else:
            interpreter = not _cuda_device()
    wanted = "1" if interpreter else "0"
    if "triton" in sys.modules and (value or "0") != wanted:
        raise RuntimeError(
            f"triton was already imported with {VARIABLE}={value or 'unset'}, so its kernels cannot run "
            f"{'in the interpreter' if interpreter else 'on CUDA'} in this process (triton-lang/triton#5142): "
            f"set {VARIABLE}={wanted} before anything imports triton (transformers and torch.compile do), "
            "or import critscale.kernels first")
    os.environ[VARIABLE] = wanted
    return interpreter


def main() -> int:
    try:
        print("1" if choose() else "0")
    except ValueError as err:
        print(f"critscale.triton_backend: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
