"""Recorded GPU runs of the diagnostic, read back for a page.

A record is in the layout ``scripts/gpu_gpt2.py`` writes (``results/gpu/gpt2_small_diagnostic.json``: per
model, the tables of a :class:`.pipeline.Diagnosis`, its training and timings), as
:func:`critscale.page.gpu_results.load` returns every file; ``results/gpu/gpt2_small_attention.json``, written by the
previous pipeline, reaches this module upgraded to it, with one trained model and no null heads.
:func:`recorded_diagnoses` rebuilds the diagnoses that :mod:`.compare` draws; :func:`recorded_table` and
:func:`recorded_text` say in a table and in plain numbers what the run holds and, for a run without null heads,
what it lacks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .compare import null_table, summary_line
from .pipeline import Diagnosis


def _restore(value):
    """JSON has no inf or NaN: the recorded files store them as the strings 'inf', '-inf', 'nan'."""
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, dict):
        return {k: _restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v) for v in value]
    return value


def from_record(entry: dict) -> Diagnosis:
    """A :class:`.pipeline.Diagnosis` from one model's entry of a record (its ``text_loss``, where recorded, in
    its ``meta``)."""
    frames = {key: pd.DataFrame(_restore(entry[key])) for key in ("heads", "nulls", "bins", "entropy_curves",
                                                                   "profiles")}
    meta = dict(entry["meta"], text_loss=entry["text_loss"]) if "text_loss" in entry else dict(entry["meta"])
    return Diagnosis(frames["heads"], frames["nulls"], frames["bins"], frames["entropy_curves"], frames["profiles"],
                     meta=_restore(meta))


RECORDED_LABELS = {"smollm2": "SmolLM2 135M", "trained": "GPT-2-small trained", "step0": "GPT-2-small step 0"}
PREVIOUS = " (previous pipeline)"  # after the label of each model of a run of the previous pipeline


def has_nulls(data: dict) -> bool:
    """Whether the record holds null heads for each of its models (a run of the previous pipeline holds none)."""
    return all(len(entry["nulls"]) > 0 for entry in data["models"].values())


def recorded_diagnoses(data: dict) -> dict[str, Diagnosis]:
    """The diagnoses of a recorded GPU run, labelled for a page."""
    models, after = data["models"], PREVIOUS if data.get("pipeline") == "previous" else ""
    return {RECORDED_LABELS[key] + after: from_record(models[key]) for key in RECORDED_LABELS if key in models}


def _shape(config: dict) -> str:
    return f"{config['n_layer']} layers, {config['n_head']} heads, width {config['n_embd']}, context {config['n_positions']}"


def recorded_table(data: dict) -> pd.DataFrame:
    """One line per model of a recorded run: :func:`.compare.null_table`, or, for a run without null heads, its
    counts (:func:`_table_without_nulls`)."""
    if not has_nulls(data):
        return _table_without_nulls(data)
    return null_table([summary_line(label, diag) for label, diag in recorded_diagnoses(data).items()])


def recorded_text(data: dict, gauss_linear_share: float | None = None) -> str:
    """What a recorded run holds, in plain numbers: provenance, training, the timed diagnosis, each model.

    A run without null heads is said by :func:`_text_without_nulls`, which needs ``gauss_linear_share``, the share
    of rows a Gaussian null reads as linear on the page that shows it; a ``ValueError`` says so when it is missing.
    """
    if not has_nulls(data):
        if gauss_linear_share is None:
            raise ValueError("recorded_text: a run without null heads is stated beside the Gaussian null's share of "
                             "linear rows (gauss_linear_share), which was not given")
        return _text_without_nulls(data, gauss_linear_share)
    p, models = data["provenance"], data["models"]
    lines = [summary_line(label, diag) for label, diag in recorded_diagnoses(data).items()]
    text = (f"The run of `scripts/gpu_gpt2.py` recorded at commit `{p['commit']}` on an {p['device']} "
            f"({p['date_utc']}, {p['wall_time_s']:.0f} s in all) read {', '.join(l['model'] for l in lines)} with "
            f"the calibrated pipeline of this page: {models['step0']['meta']['windows']} windows per GPT-2 model, "
            f"the suffix design, {len(models['step0']['meta']['nulls'])} null heads, row statistics by the "
            f"{'fused q·k kernel' if models['step0']['meta']['backend'] == 'kernel' else 'float64 reference'}. ")
    if "trained" in models:
        t = models["trained"]["training"]
        text += (f"The GPT-2-small shape ({_shape(models['trained']['train_config'])}) was trained for {t['steps']} "
                 f"steps in {t['train_seconds']:.0f} s, reaching {t['heldout_bits_per_byte']:.3f} bits per byte on "
                 "held-out text. ")
    timing = models["step0"]["seconds"]
    text += (f"The whole diagnosis of its {len(models['step0']['heads'])} heads at step 0, nulls included, took "
             f"{timing['diagnose']:.0f} s, {timing['heads']:.0f} s of it for the heads. ")
    text += " ".join(
        f"{l['model']} ({l['windows']} windows of {l['window_length']} tokens): {l['beyond']} of {l['heads']} heads "
        f"beyond the null, {l['sink_heads']} sink heads, median $p_{{\\max}}$ {l['p_max']:.3g} (null "
        f"{l['p_max_null']:.3g}), median $\\gamma$ {l['gamma']:.2f} (null {l['gamma_null']:.2f})." for l in lines)
    failed = data.get("errors") or {}
    if failed or not data.get("complete", False):
        text += " The run did not complete" + (": " + "; ".join(
            f"{RECORDED_LABELS.get(k, k)} failed ({v['error']})" for k, v in failed.items()) if failed else "") + "."
    return text


def _text_without_nulls(data: dict, gauss_linear_share: float) -> str:
    """What a run without null heads (one trained model, the previous pipeline) recorded, and why none of it reads
    as an effect: the record's ``pipeline_note`` says what that pipeline did."""
    p, entry = data["provenance"], data["models"]["trained"]
    meta, training, heads = entry["meta"], entry["training"], pd.DataFrame(entry["heads"])
    laws = heads["law"].value_counts()
    return (
        f"The GPU result recorded so far comes from the diagnostic's previous pipeline ({p['device']}; its commit "
        f"and date are in the note above): a GPT-2-small-shaped model ({_shape(entry['train_config'])}) trained for "
        f"{training['steps']} steps in {training['train_seconds']:.0f} s to {training['heldout_bits_per_byte']:.3f} "
        f"bits per byte on held-out text, then read on {meta['windows']} windows of {meta['window_length']} tokens. "
        f"It reads {laws.get('linear', 0)} of its {len(heads)} heads as linear, {laws.get('step', 0)} "
        f"as step and {heads['sink'].sum()} as sink heads, with median $\\gamma$ of $\\kappa_{{16}}$ "
        f"{np.median(heads['gamma']):.2f}. "
        "None of these numbers can be read as an effect.\n\nThat pipeline recorded no null heads, and a majority of "
        "linear heads says nothing by itself: on this page the rows of the Gaussian null read linear in "
        f"{gauss_linear_share:.0%} of cases. " + data["pipeline_note"])


def _table_without_nulls(data: dict) -> pd.DataFrame:
    """One line for a run without null heads, in the words of :func:`.compare.null_table`."""
    entry = data["models"]["trained"]
    heads = pd.DataFrame(entry["heads"])
    laws = heads["law"].value_counts()
    return pd.DataFrame([{
        "model": RECORDED_LABELS["trained"] + PREVIOUS, "heads": len(heads), "windows": entry["meta"]["windows"],
        "linear / power / step heads": f"{laws.get('linear', 0)} / {laws.get('power', 0)} / {laws.get('step', 0)}",
        "sink heads": int(heads["sink"].sum()),
        "\\(\\gamma\\) of \\(\\kappa_{16}\\) (median)": round(float(np.median(heads["gamma"])), 2),
        "null heads": "none recorded"}])
