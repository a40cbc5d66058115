"""Stage 5: the diagnosis as tables, text and figures in a run directory.

Tables (CSV): ``heads.csv`` (one line per head), ``nulls.csv`` (one line per null head, the same
columns plus its construction and known law), ``bins.csv`` (per unit and context length),
``entropy_curves.csv``, ``profiles.csv`` and, when asked, ``rows.csv.gz`` (every row read).
``summary.json`` holds the design, the rule references, the counts, the model's verdict and the run manifest;
``summary.txt`` the plain-text summary that the command prints, which leads with the verdict (:mod:`.verdict`).
``schedule.json`` is the verdict per layer and the schedule to apply (:mod:`.schedule`), with the run manifest;
``report.html`` one self-contained page of it all (:mod:`.htmlreport`).  Figures: :mod:`.figures`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import laws
from .pipeline import Diagnosis
from .rundir import REPORT_FILE, SCHEDULE_FILE, commit, staging
from .schedule import Schedule, layer_schedule
from .summary import CROSSOVER, REFERENCE_NULL
from .verdict import RULE_WORDS, verdict_lines

REGIMES = ("subcritical", "crossover", "supercritical")


def law_counts(diag: Diagnosis) -> dict[str, int]:
    """Number of heads per law (``linear``, ``power``, ``step``, and ``undefined`` when any)."""
    counts = diag.heads["law"].value_counts().to_dict()
    out = {law: int(counts.get(law, 0)) for law in laws.LAWS}
    if counts.get("undefined", 0):
        out["undefined"] = int(counts["undefined"])
    return out


def regime_counts(diag: Diagnosis) -> dict[str, dict[str, int]]:
    """Heads per regime under each operating point: beta_1/2, kappa, kappa_16."""
    return {column: {r: int((diag.heads[column] == r).sum()) for r in REGIMES}
            for column in ("regime", "regime_kappa", "regime_kappa16")}


def _fmt(x, spec=".3g") -> str:
    return "nan" if x is None or not np.isfinite(x) else format(x, spec)


def _interval(row, name) -> str:
    return f"{_fmt(row[name], '.2f')} [{_fmt(row[name + '_low'], '.2f')}, {_fmt(row[name + '_high'], '.2f')}]"


def degenerate_warning(diag: Diagnosis) -> list[str]:
    """One warning line naming the degenerate heads (all logits of most rows equal), or none."""
    names = diag.meta.get("degenerate_heads", [])
    if not names:
        return []
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return [f"warning: {len(names)} of {len(diag.heads)} heads are degenerate (every logit equal in at least "
            f"{diag.meta['degenerate_threshold']:.0%} of their rows: all-zero or constant q or k): {shown}; "
            f"they have no law, sink, kappa, gamma or rule (null spread: {diag.meta['null_spread_from']})"]


def summary_text(diag: Diagnosis, manifest: dict | None = None, schedule: Schedule | None = None) -> str:
    """Plain-text summary: the verdict first (``schedule``, by default :func:`.schedule.layer_schedule` of ``diag``),
    then the operating point, laws, gamma and rules beside the nulls."""
    h, nulls, meta = diag.heads, diag.nulls.set_index("unit"), diag.meta
    ref = nulls.loc[REFERENCE_NULL] if REFERENCE_NULL in nulls.index else None
    lines = []
    if manifest is not None:
        lines += [f"command: {manifest['command']}", f"commit {manifest['commit']}, {manifest['date_utc']}", ""]
    lines += verdict_lines(schedule if schedule is not None else layer_schedule(diag)) + [""]
    intervals = ("95% bootstrap intervals over windows" if meta["intervals"] else
                 f"no intervals: they need at least {meta['min_windows_for_intervals']} windows")
    lines += [f"input: {meta['input']}",
              f"design: {meta['windows']} window(s) of {meta['window_length']} tokens; {meta['design_text']}",
              f"nulls: {', '.join(meta['nulls'])} ({meta['null_windows']} windows each, the rules' references "
              f"{meta.get('rule_null_windows', meta['null_windows'])}, same design); {intervals}; "
              f"{meta['seconds']:.1f} s ({meta['backend']})"]
    if "text_loss" in meta:
        loss = meta["text_loss"]
        lines.append(f"the model's next-token loss on the windows read: {_fmt(loss['nats_per_token'], '.3f')} nats "
                     f"per token, {_fmt(loss['bits_per_byte'], '.3f')} bits per byte ({loss['tokens']} tokens)")
    lines += degenerate_warning(diag)
    lines.append("")
    counts = regime_counts(diag)
    lines += [f"operating point at the model's temperature (rows of n = {meta['window_length']}, medians per head; "
              f"median over heads):",
              f"  p_max {_fmt(h['p_max'].median())}, entropy {_fmt(h['entropy'].median())} nats "
              f"(log n = {_fmt(np.log(meta['window_length']))}), beta_1/2 {_fmt(h['beta_half'].median())} "
              f"(in units of the model's beta)"]
    if ref is not None:
        lines.append(f"  Gaussian q/k null at the same logit spread: p_max {_fmt(ref['p_max'])}, "
                     f"entropy {_fmt(ref['entropy'])}, beta_1/2 {_fmt(ref['beta_half'])}")
    lines.append(f"  regimes (c <= {CROSSOVER[0]:g} subcritical, {CROSSOVER[0]:g} < c < {CROSSOVER[1]:g} crossover, "
                 f"c >= {CROSSOVER[1]:g} supercritical):")
    for column, label in (("regime", "c = 1/beta_1/2"), ("regime_kappa", "c = 1/kappa"),
                          ("regime_kappa16", "c = 1/kappa_16")):
        lines.append(f"    by {label:<15s} " + ", ".join(f"{k} {v}" for k, v in counts[column].items()))
    lines += ["", "heads per law of log N(t): " + ", ".join(f"{k} {v}" for k, v in law_counts(diag).items())
              + f"; sink heads: {int(h['sink'].sum())} of {len(h)}"]
    if ref is not None:
        lines += ["  row shares linear/power/step, median over heads: "
                  + "/".join(_fmt(h[f"rows_{law}"].median(), ".2f") for law in laws.LAWS)
                  + "; Gaussian q/k null: " + "/".join(_fmt(ref[f"rows_{law}"], ".2f") for law in laws.LAWS),
                  f"  heads whose law shares or gamma differ from {meta.get('null_replicates', 0)} Gaussian null "
                  f"replicates (at most {meta.get('flag_level', 0.05):.0%} of heads without structure): "
                  f"{int((h['beyond_null'] != '').sum())} of {len(h)}"]
        lines.append(f"gamma (kappa_16 on n >= {meta['kappa16_min_n']}): median over heads "
                     f"{_fmt(h['gamma'].median(), '.2f')}; Gaussian q/k null {_interval(ref, 'gamma')}")
    lines += ["rule keeping c flat (heads): " + ", ".join(f"{RULE_WORDS[k]} {v}"
                                                        for k, v in h["best_rule"].value_counts().items()),
              "", "null heads (known law -> law read; gamma of kappa_16 [95%]; exact kappa_bar slope; rule):"]
    for name, r in nulls.iterrows():
        lines.append(f"  {name:<15s} {r['known_law']:>6s} -> {r['law']:<9s} {_interval(r, 'gamma'):<22s} "
                     f"exact {_fmt(r['gamma_exact'], '.2f'):>5s}  {RULE_WORDS[r['best_rule']]}")
    lines += ["", "layer head  p_max  H     beta1/2 | kappa  kappa16 | c_half regime        | law    step  "
              "beyond the null       sink | gamma [95%]          | best rule"]
    for _, r in h.iterrows():
        lines.append(f"{r['layer']:5d} {r['head']:4d}  {_fmt(r['p_max'], '.3f'):5s}  {_fmt(r['entropy'], '.2f'):5s} "
                     f"{_fmt(r['beta_half'], '.3g'):7s} | {_fmt(r['kappa'], '.3g'):6s} {_fmt(r['kappa16'], '.3g'):7s} | "
                     f"{_fmt(r['c_half'], '.3g'):6s} {r['regime']:13s} | {r['law']:6s} {_fmt(r['rows_step'], '.2f'):5s} "
                     f"{r.get('beyond_null', ''):21s} {'yes' if r['sink'] else 'no':4s} | {_interval(r, 'gamma'):20s} | "
                     f"{RULE_WORDS[r['best_rule']]}")
    return "\n".join(lines)


def write_outputs(diag: Diagnosis, out_dir, *, manifest: dict, figures: bool = True, rows: bool = False) -> list[Path]:
    """Write tables, summaries, figures and ``run.json`` into ``out_dir`` (checked by :mod:`.rundir`).

    Every file is written into a staging folder there and renamed into place, ``run.json`` last
    (:func:`.rundir.commit`); a failure leaves ``out_dir`` as it was.  Returns the paths written.
    """
    out = Path(out_dir)
    if rows and diag.rows is None:
        raise ValueError("rows were not kept: diagnose with keep_rows=True to write rows.csv.gz")
    manifest = {**manifest, "schedule": SCHEDULE_FILE, "report": REPORT_FILE}
    with staging(out) as stage:
        written = _write_files(diag, stage, manifest=manifest, figures=figures, rows=rows)
        return commit(stage, out, written, manifest)


def _write_files(diag: Diagnosis, out: Path, *, manifest: dict, figures: bool, rows: bool) -> list[Path]:
    """Tables, summaries, the schedule, figures and the HTML report in ``out``; returns their paths."""
    from .htmlreport import report_html

    schedule = layer_schedule(diag)
    schedule.run = manifest
    written = []
    tables = [("heads", diag.heads), ("nulls", diag.nulls), ("bins", diag.bins), ("entropy_curves", diag.curves),
              ("profiles", diag.profiles)] + ([("rows", diag.rows)] if rows else [])
    for name, frame in tables:
        path = out / (f"{name}.csv.gz" if name == "rows" else f"{name}.csv")
        frame.to_csv(path, index=False)
        written.append(path)
    from critscale.page.pagedata import _json_safe, plain

    summary = {**diag.meta, "law_counts": law_counts(diag), "regime_counts": regime_counts(diag),
               "sink_heads": int(diag.heads["sink"].sum()),
               "degenerate_head_count": len(diag.meta.get("degenerate_heads", [])),
               "verdict": schedule.to_dict()["model"], "schedule": SCHEDULE_FILE, "run": manifest}
    (out / "summary.json").write_text(json.dumps(_json_safe(plain(summary)), indent=1) + "\n")
    (out / "summary.txt").write_text(summary_text(diag, manifest, schedule) + "\n")
    written += [out / "summary.json", out / "summary.txt", schedule.to_json(out / SCHEDULE_FILE)]
    pngs = []
    if figures:
        from .figures import save_all

        pngs = save_all(diag, out, manifest=manifest)
        written += pngs
    page = report_html(diag, schedule, manifest, {p.stem: p for p in pngs}, [p.name for p in written])
    (out / REPORT_FILE).write_text(page, encoding="utf-8")
    return written + [out / REPORT_FILE]
