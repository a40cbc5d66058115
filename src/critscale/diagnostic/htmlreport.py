"""``report.html``: one self-contained page per run, to read offline.

The verdict first (the model's rule, share and beta growth, :mod:`.verdict`), then the per-layer table, the
figures (the run's PNG files embedded as ``data:`` URIs), the null heads beside the model's heads (the
null table of the summary), and the provenance (the run manifest: command, inputs, commit, versions, device,
and the cache directory with ``CRITSCALE_CACHE``).
Plain HTML with inline CSS, no script, no external file or address: the page reads the same from a copied
directory on a machine without a network.  Tables fit a 1280 px window.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from .schedule import MULTIPLES, STATISTIC, Schedule
from .verdict import RULE_HTML, growth_sentence, layer_cells, model_cells, number, rule_sentence

FIGURE_CAPTIONS = {
    "kappa_vs_n": "kappa_16 against n, each head beside the null heads",
    "head_maps": "per-head maps (layer by head)",
    "profiles": "median scale-free gap profiles",
    "entropy_curves": "entropy and p_max against beta",
    "operating_points": "operating points",
    "law_shares": "law shares of the rows",
}
CSS = """
body { font-family: system-ui, sans-serif; max-width: 1240px; margin: 1em auto; padding: 0 1em; color: #111; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.verdict { background: #f3f7fb; border: 1px solid #9bb; padding: 0.6em 1em; }
.verdict p { margin: 0.3em 0; }
figure { display: inline-block; margin: 0.5em; max-width: 600px; vertical-align: top; }
figure img { max-width: 100%; } figcaption { font-size: 0.85em; color: #444; }
pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; font-size: 0.8em; }
.note { font-size: 0.9em; color: #333; }
"""


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _table(header: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td class=\"num\">{_e(c)}</td>" if i in numeric else f"<td>{_e(c)}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def verdict_section(schedule: Schedule) -> str:
    """The model's verdict: its rule and share, the growth of beta at 2T, 4T, 8T, and what they mean."""
    cells = model_cells(schedule, RULE_HTML)
    T = schedule.read_length
    growth = _table(["n", *[f"{k}T = {k * T}" for k in MULTIPLES]],
                    [["beta(n) / beta(T) [95%]", *[cells[f"growth_{k}"] for k in MULTIPLES]]], {1, 2, 3})
    return (f"<section class=\"verdict\" id=\"verdict\"><h2>Verdict</h2>"
            f"<p><strong>Model: {_e(rule_sentence(schedule.model, cells))}.</strong></p>"
            f"<p>{_e(growth_sentence(schedule, schedule.model, cells))}.</p>{growth}"
            f"<p class=\"note\">T = {T} is the longest context the diagnosis read. A head's accumulation scale "
            f"kappa_n (the median {STATISTIC} of its rows at length n) follows (log n)^gamma over the lengths read; "
            "keeping its operating point c = beta/kappa_n at its value at T needs beta(n)/beta(T) = "
            "(log n / log T)^gamma. Beyond T this is an extrapolation of the power fitted up to T. A rule is named "
            "only where its share of the heads decided for a rule has an exact 95% interval above every other rule's. "
            "For a model with a fixed table of positions (learned absolute positions, such as GPT-2's or BERT's), "
            "lengths beyond its table cannot be run at all: the factors beyond T apply only where the model "
            "itself can run beyond T.</p>"
            "<p class=\"note\">Apply it (the file <code>schedule.json</code> of this run):</p>"
            "<pre>from critscale.diagnostic.schedule import Schedule\n"
            "from critscale.models.temperature import tempered\n\n"
            "s = Schedule.from_json(\"run/schedule.json\")\n"
            "with tempered(model, s.factor):\n    model.generate(...)</pre></section>")


def layer_section(schedule: Schedule) -> str:
    """The per-layer table: rule, share [interval], gamma [interval], beta growth at 2T, 4T, 8T [interval]."""
    rows = [[c["layer"], c["rule"], c["plurality"], c["heads"], c["share"], c["gamma"],
             *[c[f"growth_{k}"] for k in MULTIPLES], c["excluded"]] for c in layer_cells(schedule, RULE_HTML)]
    header = ["layer", "rule", "most frequent", "heads", "share of decided [95%]", "gamma [95%]",
              *[f"\u03b2 \u00d7 at {k}T [95%]" for k in MULTIPLES], "no gamma"]
    return (f"<section id=\"layers\"><h2>Per layer</h2>"
            f"{_table(header, rows, {0, 3, 4, 5, 6, 7, 8, 9})}"
            "<p class=\"note\">heads: heads of the most frequent rule / heads decided for a rule (undecided heads back "
            "no rule and are left out of every share); no gamma: heads left out "
            "of the median (degenerate, or too few levels). Shares: of the layer's decided heads, with exact "
            "(Clopper-Pearson) 95% intervals over them. gamma and growth: 95% window bootstrap, the "
            "same resampled windows for every head in each replicate, median over the layer's heads.</p></section>")


def figures_section(figures: dict[str, Path]) -> str:
    """Every figure of the run, embedded (base64 PNG); a line saying so when the run wrote none."""
    if not figures:
        return "<section id=\"figures\"><h2>Figures</h2><p>This run wrote no figures (--no-figures).</p></section>"
    items = []
    for name, path in figures.items():
        data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        caption = FIGURE_CAPTIONS.get(name, name)
        items.append(f"<figure><img alt=\"{_e(caption)}\" src=\"data:image/png;base64,{data}\">"
                     f"<figcaption>{_e(name)}.png: {_e(caption)}</figcaption></figure>")
    return f"<section id=\"figures\"><h2>Figures</h2>{''.join(items)}</section>"


def _interval_text(row, name) -> str:
    return f"{number(row[name])} [{number(row[name + '_low'])}, {number(row[name + '_high'])}]"


def nulls_section(diag) -> str:
    """The null heads (known law, law read, gamma, exact slope, rule) beside the model's heads (medians, counts)."""
    heads = diag.heads
    rows = []
    for _, r in diag.nulls.iterrows():
        rows.append([r["unit"], r.get("description", ""), r.get("known_law", ""), r["law"], _interval_text(r, "gamma"),
                     number(r.get("gamma_exact", float("nan"))), r.get("best_rule", ""), number(r["p_max"], ".3g")])
    laws = heads["law"].value_counts().to_dict()
    model_row = ["model heads", f"{len(heads)} heads (median over heads)",
                 "", ", ".join(f"{k} {v}" for k, v in laws.items()),
                 f"{number(heads['gamma'].median())} (median)", "",
                 ", ".join(f"{k} {v}" for k, v in heads["best_rule"].value_counts().items()),
                 number(heads["p_max"].median(), ".3g")]
    table = _table(["null", "construction", "known law", "law read", "gamma of kappa_16 [95%]", "exact slope", "rule",
                    "p_max at n = T"], [model_row] + rows, {5, 7})
    beyond = int((heads["beyond_null"] != "").sum()) if "beyond_null" in heads else 0
    meta = diag.meta
    return (f"<section id=\"nulls\"><h2>Null heads beside the model</h2>{table}"
            f"<p class=\"note\">{beyond} of {len(heads)} heads differ from {meta.get('null_replicates', 0)} Gaussian "
            f"null replicates (at most {meta.get('flag_level', 0.05):.0%} of heads without structure are flagged). "
            f"Nulls read {meta.get('null_windows', '?')} windows each over the same design "
            f"({_e(meta.get('design_text', ''))}).</p></section>")


def provenance_section(manifest: dict | None, outputs: list[str]) -> str:
    """The run manifest: command, inputs with their SHA-256, commit, date, device, versions, cache directory."""
    from .rundir import cache_description

    cache_line = (manifest or {}).get("cache") or cache_description()
    rows = []
    if manifest is not None:
        rows += [["command", manifest.get("command", "")], ["commit", manifest.get("commit", "")],
                 ["date", manifest.get("date_utc", "")], ["device", manifest.get("device", "")],
                 ["python", manifest.get("python", "")]]
        for entry in manifest.get("inputs", []):
            rows.append([f"input: {entry.get('role', '')}", f"{entry.get('path', '')} (sha256 {entry.get('sha256')})"])
        rows += [[f"package {k}", v] for k, v in (manifest.get("packages") or {}).items()]
    rows += [["cache directory", cache_line], ["files of this run", ", ".join(outputs + ["run.json"])]]
    return f"<section id=\"provenance\"><h2>Provenance</h2>{_table(['', ''], rows)}</section>"


def report_html(diag, schedule: Schedule, manifest: dict | None, figures: dict[str, Path], outputs: list[str]) -> str:
    """The whole page (module docstring)."""
    title = f"critscale diagnosis: {diag.meta.get('input', '')}"
    meta = diag.meta
    lead = (f"<p class=\"note\">{_e(meta.get('windows', '?'))} windows of {_e(meta.get('window_length', '?'))} "
            f"tokens; {_e(meta.get('design_text', ''))}.</p>")
    body = "".join([f"<h1>{_e(title)}</h1>", lead, verdict_section(schedule), layer_section(schedule),
                    figures_section(figures), nulls_section(diag), provenance_section(manifest, outputs)])
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<link rel=\"icon\" href=\"data:,\"><title>{_e(title)}</title><style>{CSS}</style></head><body>{body}</body></html>\n")
