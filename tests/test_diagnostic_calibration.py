"""The diagnostic's decisions, measured on heads whose answer is known: the rates they state are the rates they have.

* **False flags.**  200 i.i.d. Gaussian heads (built like ``gauss_qk``, d_head 64) per design (suffix and
  prefix) and number of windows (8 and 32), read by :func:`critscale.diagnostic.pipeline.diagnose_source`
  against their own null: the share flagged ``beyond_null`` must lie within the exact (Clopper-Pearson)
  99% interval of the stated level, :data:`.inference.FLAG_LEVEL`.  Before the test against null
  replicates (one shared null draw taken as exact beside bootstrap standard errors), these heads were
  flagged at 5.5% / 15.5% / 3.0% / 10.0% (suffix 8, 32; prefix 8, 32 windows), as that one draw fell;
  with the Bonferroni correction dropped, at 16-16.5%.
* **The null's scale.**  The same Gaussian heads' p_max at the model's temperature lies outside the
  central 95% of the null replicates' in 5% of heads (Clopper-Pearson 99%): the null is a head without
  structure *at the heads' logit scale*.  A null scaled by spread/d instead of spread/sqrt(d) puts every
  head outside.
* **The rule.**  Heads of each rule's null family, at the default 32 windows: among the heads whose rule is
  decided, at least 95% get the rule of their family; the undecided share is reported (printed).
* **Two null seeds on a real model.**  SmolLM2-135M's 270 heads as chapter 13's cpu profile reads them (8
  windows of 2048 tokens, prefix design, seed 12697), their summaries kept in tests/data/smollm2_heads.json
  (:func:`.calibration.heads_record`; reading the model again costs minutes on these CPUs, redrawing its
  nulls does not), are set against the nulls and null replicates of two other seeds
  (:func:`.pipeline.with_null_seed`): the same decision, beyond the null or not and the rule, on at least
  :data:`.calibration.SEED_AGREEMENT` of the heads.
* **Two null seeds on structured heads.**  A structured set of heads whose answer is known: Gaussian heads,
  heads whose rows are i.i.d. exponential,
  log-exponential or uniform scores, heads whose first key tops about a fifth of their rows (weak sinks)
  and heads whose first key tops every row (sinks).  Read with two seeds (null replicates and null heads
  redrawn), the decision beyond the null or not agrees on at least 95% of heads (the rule's agreement is
  printed: a head whose interval sits at the edge of a reference's can go either way), and the sink
  decision is the construction's: a head is a sink when its first key is the row maximum in at least
  half of its rows.

Sizes are small (256 tokens, 2 queries per length) so that the Gaussian and rule tests run in about a minute and a
half; the real model's test adds two null stages at its 2048 tokens (measured 7 minutes on two shared, heavily loaded
cores, where the whole chapter's cpu-profile diagnosis of SmolLM2 took 17).
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from critscale import families
from critscale.diagnostic import calibration, inference, pipeline
from critscale.diagnostic.calibration import flag_rate, rule_accuracy, rule_null_heads
from critscale.diagnostic.design import make_design
from critscale.diagnostic.schedule import clopper_pearson
from critscale.diagnostic.windows import ArraySource

pytestmark = pytest.mark.slow

T, D, QUERIES = calibration.WINDOW_LENGTH, calibration.HEAD_DIM, calibration.QUERIES
HEADS = calibration.TEST_GAUSSIAN_HEADS
SMOLLM2_HEADS = Path(__file__).parent / "data" / "smollm2_heads.json"


def gaussian_diagnosis(kind: str, windows: int):
    return calibration.gaussian_heads(kind, windows, HEADS)


@pytest.fixture(scope="module")
def gaussian():
    return {(kind, w): gaussian_diagnosis(kind, w) for kind in ("suffix", "prefix") for w in (8, 32)}


CASES = [(kind, w) for kind in ("suffix", "prefix") for w in (8, 32)]


@pytest.mark.parametrize("case", CASES, ids=[f"{k}-{w}" for k, w in CASES])
def test_gaussian_heads_are_flagged_at_the_stated_rate(gaussian, case):
    """Heads drawn like the null are flagged ``beyond_null`` at the rate :data:`FLAG_LEVEL` states (module docstring)."""
    heads = gaussian[case].heads
    rate = flag_rate(gaussian[case])
    flagged, low, high = rate["flagged"], rate["low"], rate["high"]
    print(f"{case}: {flagged} of {len(heads)} flagged, 99% interval [{low:.3f}, {high:.3f}]")
    assert len(heads) >= 200 and rate["confidence"] == 0.99
    assert low <= inference.FLAG_LEVEL <= high, (case, flagged)
    assert np.isfinite(heads["null_p"]).all()


@pytest.mark.parametrize("case", CASES, ids=[f"{k}-{w}" for k, w in CASES])
def test_the_null_has_the_heads_operating_point(gaussian, case):
    """Gaussian heads read at their own scale sit inside their null replicates' p_max distribution (module docstring)."""
    diag = gaussian[case]
    low, high = np.percentile(diag.replicates["p_max"], [2.5, 97.5])
    outside = int(((diag.heads["p_max"] < low) | (diag.heads["p_max"] > high)).sum())
    lo, hi = clopper_pearson(outside, len(diag.heads), 0.99)
    assert lo <= 0.05 <= hi, (case, outside, low, high, float(diag.heads["p_max"].median()))


RULE_HEADS = calibration.TEST_RULE_HEADS


def test_the_rule_of_null_heads_is_right_when_decided():
    """Heads of each rule null's family at the default windows: when the rule is decided it is right in >= 95%.

    Each head is read by the code behind every diagnosis (row statistics, :func:`.summary.summarise_unit`,
    :func:`.summary.audit` beside the rule nulls read on the pipeline's 512 windows).  A rule taken as the
    nearest reference whether or not the interval can tell them apart fails (``nearest_rule`` is wrong on
    more than 5% of these heads)."""
    heads = rule_null_heads(RULE_HEADS)
    table = rule_accuracy(heads)
    for row in table.itertuples():
        group = heads[heads["family"] == row.family]
        decided = group[~group["best_rule"].isin([inference.UNDECIDED, "undefined"])]
        print(f"{row.family}: {row.decided} of {row.heads} decided, {row.right} right; undecided "
              f"{row.undecided:.2f}, undefined {row.undefined:.2f}")
        assert row.heads == RULE_HEADS and row.decided == len(decided)
        assert row.right >= 0.95 * row.decided, (row.family, decided["best_rule"].value_counts().to_dict())
    assert table["nearest_wrong"].sum() > 0.05 * len(heads)  # the data do not single the rule out by nearness alone


def structured_heads(windows: int) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Heads of known kinds (module docstring), with their kind and whether each is a sink by construction."""
    rng = np.random.default_rng(2026)
    kinds = ["gauss"] * 12 + ["ptail1"] * 8 + ["logexp"] * 8 + ["unif"] * 8 + ["weak_sink"] * 12 + ["sink"] * 12
    q = rng.standard_normal((1, len(kinds), windows, T, D)).astype(np.float32)
    k = rng.standard_normal((1, len(kinds), windows, T, D)).astype(np.float32)
    coordinate = np.arange(T) % D  # query t reads coordinate t mod d of every key: distinct rows for its neighbours
    bulk = math.sqrt(2 * D - 1)  # |q| once q_0 = sqrt(d): the bulk logits' standard deviation before scaling
    for h, kind in enumerate(kinds):
        if kind in ("ptail1", "logexp", "unif"):  # every row i.i.d. from the family (scale 1/sqrt(d) undone)
            q[0, h] = 0.0
            q[0, h, :, np.arange(T), coordinate] = math.sqrt(D)
            k[0, h] = families.get(kind).sample(T, windows * D, rng).reshape(windows, D, T).transpose(0, 2, 1)
        elif kind in ("weak_sink", "sink"):  # the first key of every window c bulk standard deviations up
            c = 2.0 if kind == "weak_sink" else 5.0 + math.sqrt(2 * math.log(T))
            q[0, h, ..., 0] = math.sqrt(D)
            k[0, h, :, 0] = 0.0
            k[0, h, :, 0, 0] = c * bulk / math.sqrt(D)
    return torch.from_numpy(q), torch.from_numpy(k), {"kind": kinds, "sink": [kind == "sink" for kind in kinds]}


def test_two_null_seeds_give_the_same_flags_and_sinks_follow_their_definition():
    """The structured heads read twice, seeds 1 and 2: the same flag on >= 95% of heads (module docstring)."""
    windows = pipeline.WINDOWS
    q, k, truth = structured_heads(windows)
    design = make_design("prefix", T, queries=QUERIES)
    runs = [pipeline.diagnose_source(ArraySource(q, k, 1 / math.sqrt(D)), design, describe="structured heads",
                                     seed=seed, backend="reference").heads for seed in (1, 2)]
    flags = [run["beyond_null"] != "" for run in runs]
    kinds = np.array(truth["kind"])
    for kind in dict.fromkeys(truth["kind"]):
        print(kind, "flagged", [float(f[kinds == kind].mean()) for f in flags])
    print(f"the same flag on {int((flags[0] == flags[1]).sum())} of {len(kinds)} heads, the same rule on "
          f"{int((runs[0]['best_rule'] == runs[1]['best_rule']).sum())}; undecided rules "
          f"{(runs[0]['best_rule'] == inference.UNDECIDED).mean():.2f}")
    assert (flags[0] == flags[1]).mean() >= 0.95
    for run, flag in zip(runs, flags):
        assert list(run["sink"]) == truth["sink"]
        assert flag[np.isin(kinds, ("ptail1", "unif", "sink"))].all()  # plain structure is seen, whatever the seed
        assert flag[kinds == "gauss"].mean() <= 0.25  # and heads without structure are seldom flagged
    weak = runs[0]["sink_fraction"].to_numpy()[kinds == "weak_sink"]
    assert 0.1 < weak.min() and weak.max() < 0.4  # the weak sinks top a fifth of their rows, as built


def test_two_null_seeds_give_a_real_models_heads_the_same_decisions():
    """SmolLM2's recorded heads against the nulls of seeds 1 and 2 (module docstring): the same flag and the same
    rule on at least 95% of its 270 heads.  One shared null draw per diagnosis, read once and taken as exact,
    moved 159 flagged heads to 135 between two seeds (the issue that prompted the null replicates)."""
    record = json.loads(SMOLLM2_HEADS.read_text())
    diag = calibration.from_heads_record(record, backend="reference")
    first, second = (pipeline.with_null_seed(diag, seed) for seed in (1, 2))
    agreement = calibration.seed_agreement(first, second)
    print(calibration.agreement_sentence("SmolLM2-135M (recorded heads)", agreement))
    assert agreement["heads"] == 270 and agreement["tested"]
    assert agreement["share"] >= calibration.SEED_AGREEMENT, agreement
