"""The calibrated attention diagnostic (theory.md §6 P-13): any model's attention rows beside null heads.

A pipeline of stages, one module each:

1. input: :mod:`.text` (a text file, streamed into tokens for a model loaded by
   :mod:`critscale.models`) or :mod:`.qkfile` (queries and keys from arrays or an ``.npz`` file);
2. q/k windows: :mod:`.windows`, over the rows that :mod:`.design` plans (suffix or prefix design);
3. row statistics: :mod:`.rows` (the critscale row API in float64, or the fused q·k kernel on CUDA);
4. per-head summary beside its null: :mod:`.laws` (law, gamma, shares), :mod:`.nulls` (null heads
   known by construction), :mod:`.summary` (one head's summary, the audit against the nulls);
5. the verdict: :mod:`.inference` (each head against null replicates, its rule), :mod:`.schedule` (the rule
   and the growth of beta per layer and per model, and the schedule that applies it), :mod:`.verdict` (in words);
6. report: :mod:`.report` (tables and text), :mod:`.figures`, :mod:`.htmlreport` (one self-contained page),
   and :mod:`.rundir` (the run directory and the provenance of every output).

:mod:`.pipeline` runs stages 2-4 (:func:`diagnose`: an already-loaded transformers model and texts;
:func:`diagnose_model`, :func:`diagnose_qk`).  Nothing here imports
transformers; torch is imported by the q/k stages, and only when they are first used, so that the
command line can refuse a bad input before paying for that import.
"""

__all__ = ["Diagnosis", "diagnose", "diagnose_model", "diagnose_qk", "diagnose_source"]


def __getattr__(name: str):
    if name in __all__:
        from . import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
