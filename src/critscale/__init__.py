"""critscale: the executable companion to arXiv:2605.12697.

Hayase & Karakida, *A Unified Framework for Critical Scaling of Inverse Temperature
in Self-Attention* (2026).  The theory implemented here is our reconstruction of the
paper (see the book's introduction); each function's docstring names the result of
that reconstruction it implements.

Rows are the last axis of every array.  Entries equal to ``-inf`` are masked.

Every result of the book, the chapter that states it (its ``prf`` label), the function that implements
it (relative to ``critscale``) and the test that checks it (in ``tests/``).  A row with an empty first
column continues the row above.  ``tests/test_results_table.py`` checks that every label, function and
test named here exists and that every labelled result of chapters 01-11 is listed.

=======================  ====  ==================================  ====================================================
result (label)           ch.   function                            test
=======================  ====  ==================================  ====================================================
def-01-gaps              01    sorted_gaps                         test_gaps.py::test_against_brute_force
                               gap_counts                          test_gaps.py::test_sorted_gaps_layout
def-01-softmax           01    softmax_stats                       test_softmax.py::test_against_loops_and_scipy
def-01-kappa             01    accumulation_scale                  test_gaps.py::test_against_brute_force
                               legendre_transform                  test_gaps.py::test_documented_conventions
prop-01-invariances      01    accumulation_scale                  test_properties.py::test_scale_covariance_of_kappa_and_softmax
                               in_units                            test_gaps.py::test_in_units_rescales_kappa_and_softmax
                               softmax_stats                       test_properties.py::test_entropy_non_increasing_and_max_weight_non_decreasing
                                                                   test_gaps.py::test_elementary_bounds_on_family_rows
lem-01-laplace           01    gap_counts, softmax_stats           test_properties.py::test_laplace_stieltjes_identity
def-02-legendre          02    legendre_transform                  test_gaps.py::test_against_brute_force
lem-02-lambda-zero       02    legendre_transform                  test_gaps.py::test_lemma1_legendre_vanishes_exactly_above_kappa
                               bounds.spreading_bounds             test_bounds.py::test_spreading_bounds_reproduce_chapter_03_and_lemma1
thm-02-sandwich          02    bounds.free_energy_bounds           test_bounds.py::test_free_energy_bounds
                                                                   test_properties.py::test_theorem1_free_energy_sandwich
cor-02-width             02    bounds.sandwich_width_bound         test_bounds.py::test_sandwich_width_bound
thm-03-collapse          03    bounds.collapse_bounds              test_bounds.py::test_collapse_bounds
                                                                   test_properties.py::test_theorem2_supercritical_collapse
thm-03-spreading         03    bounds.spreading_bounds             test_bounds.py::test_spreading_bounds
                                                                   test_properties.py::test_theorem3_subcritical_spreading
cor-03-dispersion        03    bounds.dispersion_bounds            test_bounds.py::test_dispersion_bounds
def-04-operational       04    beta_at_max_weight                  test_roots.py::test_max_weight_root_matches_brentq
                               beta_at_entropy                     test_roots.py::test_entropy_root_matches_brentq
                                                                   test_roots.py::test_roots_agree_with_mpmath_on_near_ties_and_extreme_gaps
cor-04-critical-scale    04    bounds.critical_scale_bounds        test_bounds.py::test_critical_scale_bounds
cor-04-brackets          04    bounds.beta_half_bracket            test_bounds.py::test_beta_half_bracket
                               bounds.beta_entropy_bracket         test_bounds.py::test_beta_entropy_bracket
                                                                   test_properties.py::test_corollaries_4_and_5
prop-05-ladder           05    families.Family.kappa_bar           test_families.py::test_kappa_bar_closed_forms
                               families.Family.law                 test_families.py::test_kappa_bar_is_the_hazard_at_the_quantile
                               fitting.bootstrap_slope             test_fitting.py::test_bootstrap_slope_covers_the_true_slope
rem-05-quantile-row      05    quantile_rows.quantile_row          test_quantile_rows.py::test_quantile_row_entries
                               quantile_rows.quantile_row_scale    test_quantile_rows.py::test_quantile_row_scale_closed_forms
                                                                   test_quantile_rows.py::test_quantile_row_scale_of_planted_rows_against_brute_force
thm-06-gumbel            06    limits.gumbel_gaps                  test_limits_rules.py::test_limit_gap_laws
                               limits.kappa_limit_samples          test_limits_rules.py::test_kappa_limit_samples_against_loop
                               limits.pd_collision                 test_limits_rules.py::test_poisson_dirichlet_closed_forms
                               limits.pd_entropy                   test_limits_rules.py::test_gumbel_limit_simulation_matches_poisson_dirichlet
                               limits.poisson_limit_stats          test_limits_rules.py::test_coupled_limit_scores
                               limits.coupled_limit_scores         test_limits_rules.py::test_expansion_parameter
                               limits.expansion_parameter          test_extrapolation.py::test_standard_error_covers_the_truth_at_the_nominal_rate
                               limits.window_summaries             test_limits_rules.py::test_window_summaries
                               extrapolation.extrapolate
prop-06-stretched        06    families.ptail                      test_chapter_06.py::test_stretched_tail_misses_the_poisson_dirichlet_value_between_1_and_1_over_p
                               limits.window_summaries             test_chapter_06.py::test_stretched_tail_weight_sits_in_the_bulk
                                                                   test_families.py::test_hazard_flag_matches_the_hazard_along_the_top
thm-07-weibull           07    limits.weibull_gaps                 test_limits_rules.py::test_limit_gap_laws
                               limits.poisson_limit_stats          test_limits_rules.py::test_weibull_limit_matches_uniform_rows
                               limits.coupled_limit_scores         test_limits_rules.py::test_coupled_limit_scores
thm-08-planted           08    families.planted                    test_families.py::test_planted_rows_have_their_gap
                               families.simplex                    test_families.py::test_exact_simplex_kappa_equals_kappa_bar
                               planted.kappa_deterministic         test_planted.py::test_kappa_deterministic
                               planted.z_lln                       test_planted.py::test_z_lln
                               planted.collision_lln               test_planted.py::test_collision_lln
                               planted.midpoint_lln                test_planted.py::test_midpoint_lln
                               planted.simplex_collision_lln       test_planted.py::test_simplex_collision_lln
prop-09-legendre         09    profiles.entropy_profile_limit      test_profiles.py::test_entropy_profile_limit
                               profiles.legendre_point             test_profiles.py::test_profile_is_the_legendre_point_of_the_smooth_gap_count
                                                                   test_profiles.py::test_legendre_point_against_brute_force
                               profiles.annealed_profile           test_profiles.py::test_annealed_profile_against_quadrature
                                                                   test_profiles.py::test_annealed_profile_expansions
prop-10-rules            10    rules.su_mean_field_entropy         test_limits_rules.py::test_su_mean_field_entropy_on_step_rows
                               rules.drift                         test_limits_rules.py::test_rules_audit_numbers_of_theory
                               rules.loglog_exponent               test_limits_rules.py::test_loglog_exponent_of_known_laws
                               rules.RULES                         test_limits_rules.py::test_rules_values
prop-11-crossover        11    crossover.sphere_gauss_ratio        test_crossover.py::test_sphere_gauss_ratio
                               crossover.crossover_scaling_limit   test_crossover.py::test_crossover_scaling_limit
=======================  ====  ==================================  ====================================================
"""
from .gaps import accumulation_scale, gap_counts, in_units, legendre_transform, sorted_gaps
from .softmax import SoftmaxStats, softmax_stats
from .roots import beta_at_entropy, beta_at_max_weight
from . import (bounds, crossover, extrapolation, families, fitting, keys, limits, montecarlo, planted, profiles,
               quantile_rows, reader_names, rules)
from .pagedata import record, record_figure
from . import gpu_records, plotting, provenance, resultmap, tables

__version__ = "0.1.0"


def __getattr__(name: str):
    """``critscale.diagnose`` (:func:`critscale.diagnostic.pipeline.diagnose`), imported when first used."""
    if name == "diagnose":
        from .diagnostic.pipeline import diagnose

        return diagnose
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "accumulation_scale",
    "beta_at_entropy",
    "beta_at_max_weight",
    "bounds",
    "crossover",
    "diagnose",
    "extrapolation",
    "families",
    "fitting",
    "gpu_records",
    "gap_counts",
    "in_units",
    "keys",
    "legendre_transform",
    "limits",
    "montecarlo",
    "planted",
    "plotting",
    "profiles",
    "provenance",
    "quantile_rows",
    "record",
    "record_figure",
    "rules",
    "softmax_stats",
    "sorted_gaps",
    "tables",
    "SoftmaxStats",
]
