"""Chapter 13 (ci profile, executed by `make test`): the recorded numbers are consistent.

Skipped when the book has not been built (see the ``ci_results`` fixture in conftest.py).
"""

import pytest
import yaml

from critscale.diagnostic.design import QUERIES, length_grid
from critscale.provenance import repo_root


def test_chapter_13_recorded_values(ci_results):
    values = ci_results("13_gpt2_attention")["values"]
    params = yaml.safe_load((repo_root() / "params" / "ci" / "13_gpt2_attention.yaml").read_text())
    assert values["capture_max_abs_diff"] < 1e-5  # captured rows reproduce the model's attention
    assert values["checkpoint"]  # the page names the checkpoint it analysed
    heads = values["n_heads"]
    if not values["pretrained"]:
        assert heads == params["train_layers"] * params["train_heads"]
        assert values["train_steps"] == params["train_steps"]
        levels = length_grid(params["train_context"])
        assert values["windows"] == params["max_windows"]
        assert values["rows_per_head"] == values["windows"] * len(levels) * QUERIES
    assert sum(values[f"law_count_{law}"] for law in ("linear", "power", "step")) <= heads
    assert 0 <= values["sink_heads"] <= heads
    assert values["subcritical_heads"] + values["crossover_heads"] + values["supercritical_heads"] <= heads
    assert values["c_min"] <= values["c_median"] <= values["c_max"]
    assert values["reference_slope_ptail1"] == pytest.approx(0.0, abs=1e-9)  # exact kappa_bar = 1
    assert values["reference_slope_logexp"] == pytest.approx(1.0, abs=1e-9)  # exact kappa_bar = log n
    assert values["null_gamma_ptail1"] < values["null_gamma_logexp"] < values["null_gamma_edge"]
    assert len(values["head_table"]["records"]) == heads
    assert len(values["null_table"]["records"]) >= 8
