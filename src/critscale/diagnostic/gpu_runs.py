"""Recorded GPU runs of the diagnostic, read back for a page.

Two files: ``results/gpu/gpt2_small_diagnostic.json``, written by ``scripts/gpu_gpt2.py`` with this
pipeline (per model: the tables of a :class:`.pipeline.Diagnosis`, its training and timings), and
``results/gpu/gpt2_small_attention.json``, the run recorded before the calibrated pipeline existed
(no null heads).  :func:`recorded_diagnoses` and :func:`legacy_diagnosis` rebuild diagnoses that
:mod:`.compare` draws; :func:`recorded_text` and :func:`legacy_text` say in plain numbers what each
run holds and, for the old one, what it lacks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .compare import summary_line
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
    """A :class:`.pipeline.Diagnosis` from one model's entry of ``gpt2_small_diagnostic.json``."""
    frames = {key: pd.DataFrame(_restore(entry[key])) for key in ("heads", "nulls", "bins", "entropy_curves",
                                                                   "profiles")}
    return Diagnosis(frames["heads"], frames["nulls"], frames["bins"], frames["entropy_curves"], frames["profiles"],
                     meta=_restore(dict(entry["meta"], text_loss=entry["text_loss"])))


RECORDED_LABELS = {"smollm2": "SmolLM2 135M", "trained": "GPT-2-small trained", "step0": "GPT-2-small step 0"}


def recorded_diagnoses(data: dict) -> dict[str, Diagnosis]:
    """The diagnoses of a recorded GPU run (``gpt2_small_diagnostic.json``), labelled for a page."""
    models = data["models"]
    return {RECORDED_LABELS[key]: from_record(models[key]) for key in RECORDED_LABELS if key in models}


LEGACY_COLUMNS = {"max_weight_median": "p_max", "first_weight_mean": "first_weight", "entropy_median": "entropy",
                  "beta_half_median": "beta_half", "c_median": "c",
                  **{f"gamma{s}": f"gamma_kappa{s}" for s in ("", "_low", "_high")},  # its gamma was kappa's
                  **{f"gamma16{s}": f"gamma{s}" for s in ("", "_low", "_high")}}


def legacy_diagnosis(data: dict) -> Diagnosis:
    """The per-head table of a run recorded before the calibrated pipeline (``gpt2_small_attention.json``,
    no null heads), with its columns renamed to this pipeline's, for :func:`compare_figure`."""
    heads = pd.DataFrame(_restore(data["heads"])).rename(columns=LEGACY_COLUMNS)
    return Diagnosis(heads, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.DataFrame(),
                     meta=_restore(dict(data["diagnose"])))


def _shape(config: dict) -> str:
    return f"{config['n_layer']} layers, {config['n_head']} heads, width {config['n_embd']}, context {config['n_positions']}"


def recorded_text(data: dict) -> str:
    """What the calibrated run recorded, in plain numbers: provenance, training, the timed diagnosis, each model."""
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


def legacy_text(data: dict, gauss_linear_share: float) -> str:
    """What the run of the previous pipeline recorded, and why none of it reads as an effect.

    ``gauss_linear_share`` is the share of rows a Gaussian null reads as linear on the page that shows it.
    """
    p, meta, training, heads = data["provenance"], data["diagnose"], data["training"], data["heads"]
    return (
        f"The GPU result recorded so far comes from the diagnostic's previous pipeline (commit `{p['commit']}`, "
        f"{p['device']}, {p['date_utc']}): a GPT-2-small-shaped model ({_shape(data['train_config'])}) trained for "
        f"{training['steps']} steps in {training['train_seconds']:.0f} s to {training['heldout_bits_per_byte']:.3f} "
        f"bits per byte on held-out text, then read on {meta['windows']} windows of {meta['window_length']} tokens. "
        f"It reads {data['law_counts']['linear']} of its {len(heads)} heads as linear, {data['law_counts']['step']} "
        f"as step and {sum(h['sink'] for h in heads)} as sink heads, with median $\\gamma$ of $\\kappa_{{16}}$ "
        f"{np.median([h['gamma16'] for h in heads]):.2f}. "
        "None of these numbers can be read as an effect. That pipeline recorded no null heads, and a majority of "
        "linear heads says nothing by itself: on this page the rows of the Gaussian null read linear in "
        f"{gauss_linear_share:.0%} of cases. It read every row of each window, so the row length grew with the "
        f"query's position; it read $\\kappa_{{16}}$ from rows of n = {meta['n_min']} entries, where it is a "
        "statistic of the row's range; and with fewer than eight windows its intervals resampled rows, ignoring "
        "that the rows of a window share their keys. The calibrated run is prepared (`scripts/gpu_gpt2.py`, which "
        "also reads the step-0 model and SmolLM2 at long contexts) and this section shows it once it is recorded.")


def legacy_table(data: dict) -> pd.DataFrame:
    """One line for the run of the previous pipeline, in the words of :func:`.compare.null_table`."""
    counts, heads = data["law_counts"], data["heads"]
    return pd.DataFrame([{
        "model": "GPT-2-small trained (previous pipeline)", "heads": len(heads), "windows": data["diagnose"]["windows"],
        "linear / power / step heads": f"{counts['linear']} / {counts['power']} / {counts['step']}",
        "sink heads": sum(h["sink"] for h in heads),
        "\\(\\gamma\\) of \\(\\kappa_{16}\\) (median)": round(float(np.median([h["gamma16"] for h in heads])), 2),
        "null heads": "none recorded"}])
