"""Intervals in tables are set compactly (critscale.page.tables.interval), not as "0.520 [0.462, 0.581]"."""

import math

from critscale.page.tables import interval


def test_symmetric_interval_is_plus_minus_with_two_digits_of_error():
    assert interval(0.52, 0.46, 0.58) == "0.520 ± 0.060"
    assert interval(12.3456, 12.0, 12.7) == "12.35 ± 0.35"


def test_asymmetric_interval_is_a_super_and_subscript():
    assert interval(0.5203, 0.4621, 0.5812) == r"\(0.520^{+0.061}_{-0.058}\)"


def test_value_is_rounded_to_the_errors_decimal_place():
    assert interval(-1.04e-4, -1.04e-4 - 3.776e-4, -1.04e-4 + 3.776e-4) == "-0.00010 ± 0.00038"


def test_an_empty_or_undefined_interval_leaves_the_value():
    assert interval(3.0, 3.0, 3.0) == "3"
    assert interval(0.5, math.nan, 0.6) == "0.5"
    assert interval(0.5, 0.6, 0.7) == "0.5"  # the value outside its interval is not dressed as one


def test_a_table_without_rows_is_a_line_saying_so():
    """Sphinx's LaTeX writer stops at a table with a header and no body (chapter 13's rule table in the ci build)."""
    import pandas as pd

    from critscale.page.tables import to_markdown

    text = to_markdown(pd.DataFrame(columns=["family", "heads"]))
    assert "|" not in text and "No rows in this build" in text and "family, heads" in text
    assert to_markdown(pd.DataFrame({"a": [1]})).count("\n") == 3  # a table with rows is still a table


def test_inline_math_gives_a_cells_words_to_prose():
    """A cell's \\(..\\) math in a sentence is $..$, unescaped (chapter 04 built it with chr(92) replacements)."""
    from critscale.page.tables import inline_math

    assert inline_math(r"only the \(\bar\kappa_n\) rule is consistent with \(H_0\)") == \
        r"only the $\bar\kappa_n$ rule is consistent with $H_0$"
    assert inline_math("neither rule is consistent with exact") == "neither rule is consistent with exact"
