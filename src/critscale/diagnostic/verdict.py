"""The verdict of a :class:`.schedule.Schedule` in words and formatted numbers, for the summary and the HTML report.

Both the plain-text summary (:func:`verdict_lines`) and the HTML report (:mod:`.htmlreport`) print the numbers
through :func:`model_cells` and :func:`layer_cells`, so the two say the same thing to the last digit.
Shares and gammas are given to two decimals, growth factors of beta to three (they sit near 1).
"""

from __future__ import annotations

import math

from .schedule import MULTIPLES, STATISTIC, Schedule

RULE_WORDS = {"none/yarn": "constant beta", "sqrt_2_log_n": "sqrt(2 log n)",
              "ssmax/entropy_invariant": "s log n (SSMax)", "log_n_squared": "(log n)^2", "undecided": "undecided",
              "undefined": "undefined"}
"""How each rule label of the schedule reads in plain text.  The code label ``none/yarn`` (kept: recorded
schedules carry it) is the rule that leaves beta constant; it is not YaRN, whose factor grows with the
length beyond its training context (chapter 14), so the reader never sees YaRN's name for it."""
RULE_HTML = {"none/yarn": "constant \u03b2", "sqrt_2_log_n": "\u221a(2 log n)", "ssmax/entropy_invariant":
             "s\u00b7log n (SSMax)", "log_n_squared": "(log n)\u00b2", "undecided": "undecided",
             "undefined": "undefined"}
"""How each rule label reads in HTML."""
RULE_BOOK = {"none/yarn": "constant \\(\\beta\\)", "sqrt_2_log_n": "\\(\\sqrt{2\\log n}\\)",
             "ssmax/entropy_invariant": "\\(s\\log n\\) (SSMax)", "log_n_squared": "\\((\\log n)^2\\)",
             "undecided": "undecided", "undefined": "undefined"}
"""How each rule label reads in the book's tables and sentences (MyST math)."""


def number(x, spec: str = ".2f") -> str:
    """``x`` formatted, ``nan`` when it is not finite."""
    return format(x, spec) if x is not None and math.isfinite(x) else "nan"


def interval(value, low, high, spec: str = ".2f") -> str:
    """``value [low, high]``; without an interval (NaN ends) only the value and ``[no interval]``."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{number(value, spec)} [no interval]"
    return f"{number(value, spec)} [{number(low, spec)}, {number(high, spec)}]"


def _cells(entry: dict, words: dict) -> dict:
    plurality = entry["rule_counts"].get(entry["plurality"], 0)
    cells = {"rule": words[entry["rule"]], "plurality": words[entry["plurality"]],
             "heads": f"{plurality}/{entry['rule_heads']}" if entry["rule_heads"] else "0/0",
             "share": interval(entry["rule_share"], entry["rule_share_low"], entry["rule_share_high"]),
             "gamma": interval(entry["gamma"], entry["gamma_low"], entry["gamma_high"]),
             "excluded": str(entry["heads_excluded"]), "rule_undefined": str(entry["rule_undefined"])}
    for k in MULTIPLES:
        cells[f"growth_{k}"] = interval(*entry["growth"][k], spec=".3f")
    return cells


def model_cells(schedule: Schedule, words: dict = RULE_WORDS) -> dict:
    """The model's verdict as formatted strings (rule, plurality, heads, share, gamma, growth_k, excluded)."""
    return _cells(schedule.model, words)


def layer_cells(schedule: Schedule, words: dict = RULE_WORDS) -> list[dict]:
    """One dict of formatted strings per layer, with ``layer``."""
    return [{"layer": str(entry["layer"]), **_cells(entry, words)} for entry in schedule.layers]


def rule_sentence(entry: dict, cells: dict) -> str:
    """The rule of a verdict entry in one sentence: the rule, the decided heads behind it and its share of the
    decided heads with its interval, then the undecided and undefined heads left out of that share."""
    if entry["rule"] == "undefined":
        return "rule undefined: no head has a rule (degenerate heads, or laws without rule nulls)"
    count, total = cells["heads"].split("/")
    left_out = f"{entry['rule_undecided']} undecided heads left out of the share"
    if entry["rule_undefined"]:
        left_out += f", {entry['rule_undefined']} heads without a rule"
    if entry["rule_heads"] == 0:
        return f"rule undecided: no head is decided for a rule ({left_out})"
    share = f"share of the decided heads {cells['share']} (exact 95% interval over the decided heads)"
    if entry["rule"] == "undecided":
        text = (f"rule undecided: the most frequent rule, {cells['plurality']} ({count} of the {total} heads decided "
                f"for a rule, {share}), does not clear every other rule's interval")
    else:
        text = f"rule {cells['rule']}: {count} of the {total} heads decided for a rule read it, {share}"
    return f"{text}; {left_out}"


def growth_sentence(schedule: Schedule, entry: dict, cells: dict) -> str:
    """The factors beta must grow by at 2T, 4T, 8T, with the gamma they come from."""
    steps = "; ".join(f"at {k}T = {k * schedule.read_length}: x{cells[f'growth_{k}']}" for k in MULTIPLES)
    excluded = f", {entry['heads_excluded']} heads without gamma left out" if entry["heads_excluded"] else ""
    return (f"beta must grow {steps} (median gamma of {STATISTIC} over {entry['heads_used']} heads "
            f"{cells['gamma']}{excluded})")


def verdict_lines(schedule: Schedule) -> list[str]:
    """The verdict as the summary's first lines: the model, then one line per layer."""
    T = schedule.read_length
    model = model_cells(schedule)
    lines = [f"verdict (T = {T}, the longest context read; factors keep c = beta/kappa_n at its value at n = T; "
             "beyond T they extrapolate the power of log n fitted up to T):",
             "  model: " + rule_sentence(schedule.model, model),
             "  " + growth_sentence(schedule, schedule.model, model),
             "  per layer (a layer's rule is decided only where its share's interval lies above every other rule's;",
             "  shares over the layer's heads decided for a rule, exact 95%; 'heads' counts the most frequent rule's",
             "  heads of the decided ones; gamma and growth 95% window bootstrap paired over heads):"]
    header = (f"  {'layer':>5s}  {'rule':<16s} {'most frequent':<16s} {'heads':>5s}  {'share of decided [95%]':<22s} "
              f"{'gamma [95%]':<20s} " + "  ".join(f"{f'beta x at {k}T [95%]':<22s}" for k in MULTIPLES))
    lines.append(header.rstrip())
    for cells in layer_cells(schedule):
        lines.append((f"  {cells['layer']:>5s}  {cells['rule']:<16s} {cells['plurality']:<16s} {cells['heads']:>5s}  "
                      f"{cells['share']:<22s} {cells['gamma']:<20s} "
                      + "  ".join(f"{cells[f'growth_{k}']:<22s}" for k in MULTIPLES)).rstrip())
    lines.append("  schedule: schedule.json (apply it with critscale.models.temperature.tempered(model, "
                 "Schedule.from_json(path).factor); see docs/diagnostic.md)")
    return lines
