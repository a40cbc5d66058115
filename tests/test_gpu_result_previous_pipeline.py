"""The diagnosis of the previous pipeline (results/gpu/gpt2_small_attention.json) reaches chapter 13 through the one
upgrade path: critscale.page.gpu_results.load gives it in the layout of scripts/gpu_gpt2.py, and the current readers of
critscale.diagnostic.gpu_runs read it.

The oracle below is the reader of the old layout as it was before the upgrade (``old_diagnosis``, ``old_text``,
``old_table``, once ``legacy_*`` in recorded.py), kept here only to pin what the page shows: the upgraded file must
give the same frames, table and words, bit for bit, since the numbers only moved.
"""

import copy
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from critscale.page import gpu_results
from critscale.diagnostic import gpu_runs

ROOT = Path(__file__).resolve().parents[1]
RAW = json.loads((ROOT / "results" / "gpu" / "gpt2_small_attention.json").read_text())
SHARE = 0.6712  # any share the page passes: the text states it as a percentage

OLD_COLUMNS = {"max_weight_median": "p_max", "first_weight_mean": "first_weight", "entropy_median": "entropy",
               "beta_half_median": "beta_half", "c_median": "c",
               **{f"gamma{s}": f"gamma_kappa{s}" for s in ("", "_low", "_high")},
               **{f"gamma16{s}": f"gamma{s}" for s in ("", "_low", "_high")}}


def old_diagnosis(data):
    return (pd.DataFrame(gpu_runs._restore(data["heads"])).rename(columns=OLD_COLUMNS),
            gpu_runs._restore(dict(data["diagnose"])))


def _shape(config):
    return f"{config['n_layer']} layers, {config['n_head']} heads, width {config['n_embd']}, context {config['n_positions']}"


def old_text(data, gauss_linear_share):
    p, meta, training, heads = data["provenance"], data["diagnose"], data["training"], data["heads"]
    return (
        f"The GPU result recorded so far comes from the diagnostic's previous pipeline ({p['device']}; its commit "
        f"and date are in the note above): a GPT-2-small-shaped model ({_shape(data['train_config'])}) trained for "
        f"{training['steps']} steps in {training['train_seconds']:.0f} s to {training['heldout_bits_per_byte']:.3f} "
        f"bits per byte on held-out text, then read on {meta['windows']} windows of {meta['window_length']} tokens. "
        f"It reads {data['law_counts']['linear']} of its {len(heads)} heads as linear, {data['law_counts']['step']} "
        f"as step and {sum(h['sink'] for h in heads)} as sink heads, with median $\\gamma$ of $\\kappa_{{16}}$ "
        f"{np.median([h['gamma16'] for h in heads]):.2f}. "
        "None of these numbers can be read as an effect.\n\nThat pipeline recorded no null heads, and a majority of "
        "linear heads says nothing by itself: on this page the rows of the Gaussian null read linear in "
        f"{gauss_linear_share:.0%} of cases. It read every row of each window, so the row length grew with the "
        f"query's position; it read $\\kappa_{{16}}$ from rows of n = {meta['n_min']} entries, where it is a "
        "statistic of the row's range; and with fewer than eight windows its intervals resampled rows, ignoring "
        "that the rows of a window share their keys. The calibrated run is prepared (it also reads the step-0 "
        "model and SmolLM2 at long contexts), and this section shows it once it is recorded.")


def old_table(data):
    counts, heads = data["law_counts"], data["heads"]
    return pd.DataFrame([{
        "model": "GPT-2-small trained (previous pipeline)", "heads": len(heads), "windows": data["diagnose"]["windows"],
        "linear / power / step heads": f"{counts['linear']} / {counts['power']} / {counts['step']}",
        "sink heads": sum(h["sink"] for h in heads),
        "\\(\\gamma\\) of \\(\\kappa_{16}\\) (median)": round(float(np.median([h["gamma16"] for h in heads])), 2),
        "null heads": "none recorded"}])


@pytest.fixture(scope="module")
def upgraded():
    return gpu_results.load("gpt2_small_attention")


def test_the_committed_file_is_of_the_previous_layout():
    assert "models" not in RAW and "gamma16" in RAW["heads"][0] and "nulls" not in RAW


def test_the_upgraded_run_gives_the_diagnosis_the_old_reader_gave_bit_for_bit(upgraded):
    assert upgraded["pipeline"] == "previous" and upgraded["upgraded_from"] == "gpt2_small_attention"
    diags = gpu_runs.recorded_diagnoses(upgraded)
    assert list(diags) == ["GPT-2-small trained (previous pipeline)"]
    diag = diags["GPT-2-small trained (previous pipeline)"]
    heads, meta = old_diagnosis(RAW)
    pd.testing.assert_frame_equal(diag.heads, heads, check_exact=True)
    assert diag.meta == meta
    assert diag.nulls.empty and diag.bins.empty and diag.curves.empty and diag.profiles.empty


def test_the_upgraded_run_gives_the_table_and_words_the_old_reader_gave_bit_for_bit(upgraded):
    assert not gpu_runs.has_nulls(upgraded)
    pd.testing.assert_frame_equal(gpu_runs.recorded_table(upgraded), old_table(RAW), check_exact=True)
    assert gpu_runs.recorded_text(upgraded, gauss_linear_share=SHARE) == old_text(RAW, SHARE)


def test_the_pinned_table_holds_the_files_counts():
    """The pinned frame itself, built from the file: 144 heads on 6 windows, law counts as recorded."""
    row = old_table(RAW).iloc[0]
    assert row["heads"] == len(RAW["heads"]) == 144 and row["windows"] == RAW["diagnose"]["windows"] == 6
    assert row["linear / power / step heads"] == "{linear} / {power} / {step}".format(**RAW["law_counts"])


def test_a_run_without_nulls_needs_the_share_it_is_stated_beside(upgraded):
    with pytest.raises(ValueError, match="gauss_linear_share"):
        gpu_runs.recorded_text(upgraded)


def test_a_file_of_neither_layout_is_refused_in_one_line():
    data = copy.deepcopy(RAW)
    data.pop("diagnose")
    with pytest.raises(gpu_results.GpuResultError, match=re.escape("not a diagnosis of the previous pipeline either "
                                                                   "(field 'diagnose')")) as err:
        gpu_results.upgrade("gpt2_small_attention", data)
    assert "results/gpu/gpt2_small_attention.json" in str(err.value) and "\n" not in str(err.value)


def test_no_reader_of_the_old_layout_remains():
    """recorded.py held legacy_diagnosis, legacy_text and legacy_table, and chapter 13 called them."""
    module = (ROOT / "src" / "critscale" / "diagnostic" / "gpu_runs.py").read_text()
    chapter = (ROOT / "notebooks" / "13_gpt2_attention.md").read_text()
    for needle in ("legacy_", "LEGACY_COLUMNS", "gamma16"):
        assert needle not in module, needle
        assert needle not in chapter, needle
