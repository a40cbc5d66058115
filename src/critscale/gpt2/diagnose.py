"""The paper's diagnostic on a GPT-2 model: per layer and head, kappa against n and the law it follows.

Protocol (theory.md §6 P-13): tokenize a text, cut it into windows of ``max_len`` tokens, capture
q and k of every layer and head (:mod:`.capture`), form the causal logit rows at the model's own
temperature and compute their statistics (:mod:`.stats`).  Per head:

* kappa, kappa_16 and beta_{1/2} against the row length n (medians per log2 n bin);
* gamma of kappa ∝ (log n)^gamma with a bootstrap interval, beside the finite-n slopes of the exact
  reference scales (theory.md §5.1 caveat) (:func:`.classify.fit_gamma`);
* the shape of log N(t): linear (Gumbel-like), step (planted/sink) or power (Weibull)
  (:func:`.classify.classify_profiles`);
* sinks (position 0 is the row maximum in at least half of the rows);
* the operating point c = 1/kappa (median), p_max and entropy at the model's temperature and
  the entropy-versus-temperature curves;
* the rescaling-rule audit: for each rule beta_rule(n) of :mod:`critscale.rules` (and "none", the
  model's constant beta), the drift of c_rule(n) = beta_rule(n)/kappa_16(n) across the n range (the
  slope of its log on log log n); the rule with the smallest drift keeps c flat for this head.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from . import classify
from ..models.capture import capture_qk, causal_logits
from .stats import BETA_GRID, kernel_available, kernel_row_statistics, row_statistics

MIN_TOKENS = 128  # gamma needs three log2(n) bins of rows with n >= N_MIN: 16-31, 32-63, 64-127
N_MIN = 16


class TextError(ValueError):
    """The text to diagnose is unusable (missing, empty or too short)."""


@dataclass
class Diagnosis:
    """Everything the diagnostic computed; every frame has ``layer`` and ``head`` columns."""

    heads: pd.DataFrame  # one row per head
    bins: pd.DataFrame  # per head and log2 n bin: medians of kappa, kappa16, c, beta_half, ...
    curves: pd.DataFrame  # entropy and p_max against beta, per head and bin (medians)
    profiles: pd.DataFrame  # median scale-free gap profile per head
    rows: pd.DataFrame  # one line per analysed row (without the curves)
    meta: dict = field(default_factory=dict)


def tokenize_text(tokenizer, text: str, *, min_tokens: int = MIN_TOKENS) -> np.ndarray:
    """Token ids of ``text``; :class:`TextError` when it is empty or shorter than ``min_tokens``."""
    if text is None or not text.strip():
        raise TextError("the text is empty: give a file with at least a few hundred characters of prose")
    ids = np.asarray(tokenizer.encode(text), dtype=np.int64)
    if len(ids) < min_tokens:
        raise TextError(f"the text is too short: {len(ids)} tokens, the diagnostic needs at least {min_tokens} "
                        f"(rows of length {N_MIN} to {min_tokens - 1} span the three log2 n bins a fit of gamma needs)")
    return ids


def read_text(path) -> str:
    """The UTF-8 text of ``path``; :class:`TextError` when it does not exist."""
    path = Path(path)
    if not path.is_file():
        raise TextError(f"text file {path} does not exist")
    return path.read_text(encoding="utf-8", errors="replace")


def windows_of(ids: np.ndarray, length: int, max_windows: int) -> list[np.ndarray]:
    """Consecutive non-overlapping windows of ``length`` tokens (one shorter window if the text is short)."""
    count = min(max_windows, len(ids) // length)
    if count == 0:
        return [ids]
    return [ids[i * length:(i + 1) * length] for i in range(count)]


def _resolve_length(context: int, max_len: int | None) -> int:
    if max_len is None:
        return min(1024, context)
    if max_len < MIN_TOKENS:
        raise ValueError(f"--max-len {max_len} is below the minimum of {MIN_TOKENS} tokens")
    if max_len > context:
        raise ValueError(f"--max-len {max_len} exceeds the model's context of {context} positions")
    return int(max_len)


def _rule_functions(context: int) -> dict:
    """n -> beta_rule(n), up to a constant: no rescaling plus the rules of critscale.rules.

    The length-extrapolation rules take n_train = the model's context, the length it was trained at.
    """
    from critscale import rules

    out = {"none": lambda n: np.ones_like(np.asarray(n, dtype=np.float64))}
    for name, rule in rules.RULES.items():
        if name in ("yarn", "entropy_invariant"):
            rule = partial(getattr(rules, name), n_train=context)
        out[name] = rule
    return out


def rule_drifts(bins: pd.DataFrame, context: int, column: str = "kappa16_median") -> dict[str, float]:
    """Per rule: slope of log(beta_rule(n)/median kappa_16) on log log n over the bins (0 = flat c).

    kappa_16 rather than kappa: its median is far less noisy (kappa has a Cauchy-like right tail from
    near-ties at the top, theory.md §7.3) and it is the same scale under regular accumulation (Cor. 4).
    """
    x = bins["log_log_n"].to_numpy()
    kappa = bins[column].to_numpy()
    centres = bins["n_centre"].to_numpy().astype(np.float64)
    out = {}
    for name, rule in _rule_functions(context).items():
        y = np.log(np.asarray(rule(centres), dtype=np.float64) / kappa)
        xc = x - x.mean()
        out[name] = float((xc * (y - y.mean())).sum() / (xc * xc).sum())
    return out


def _bins_frame(layer, head, n, values: dict, entropy, max_weight, fit: classify.GammaFit):
    keys = np.floor(np.log2(n)).astype(int)
    records, curve_records = [], []
    for b, x, kmed, count in zip(fit.bins, fit.log_log_n, fit.median_kappa, fit.rows_per_bin):
        sel = keys == b
        rec = {"layer": layer, "head": head, "log2_n_bin": int(b), "n_centre": float(np.exp(np.exp(x))),
               "log_log_n": float(x), "rows": int(sel.sum()), "kappa_median": float(kmed)}
        for name, arr in values.items():
            rec[f"{name}_median"] = float(np.nanmedian(arr[sel]))
        records.append(rec)
        h = np.median(entropy[sel], axis=0)  # (betas,)
        p = np.median(max_weight[sel], axis=0)  # (betas,)
        for beta, hv, pv in zip(BETA_GRID, h, p):
            curve_records.append({"layer": layer, "head": head, "log2_n_bin": int(b), "beta": float(beta),
                                  "entropy_median": float(hv), "max_weight_median": float(pv),
                                  "log_n_centre": float(np.exp(x))})
    return records, curve_records


def summarise_head(layer: int, head: int, data: dict, windows: np.ndarray, context: int, seed: int = 0):
    """One head's summary record, its bins and curves, its median profile (rule in :mod:`.classify`)."""
    n = data["n"].astype(np.float64)
    fit = classify.fit_gamma(n, data["kappa"], windows, seed=seed)
    fit16 = classify.fit_gamma(n, data["kappa16"], windows, seed=seed + 1)
    c = 1.0 / data["kappa"]
    c16 = 1.0 / data["kappa16"]
    one = int(np.argmin(np.abs(BETA_GRID - 1.0)))
    values = {"kappa16": data["kappa16"], "beta_half": data["beta_half"], "c": c, "c16": c16,
              "max_weight": data["max_weight"][:, one], "entropy": data["entropy"][:, one],
              "first_weight": data["first_weight"]}
    bins, curves = _bins_frame(layer, head, n, values, data["entropy"], data["max_weight"], fit)
    bins_df = pd.DataFrame(bins)
    profiles = classify.profile_of_gaps(data["top_gaps"])  # (r, K)
    long_rows = n >= 2 * profiles.shape[1]
    row_labels, _, _ = classify.classify_profiles(profiles)
    median_profile = classify.head_profile(profiles[long_rows] if long_rows.any() else profiles)
    if np.all(np.isfinite(median_profile)):
        law = classify.classify_profiles(median_profile[None, :])[0][0]
    else:
        law = "undefined"
    labelled = row_labels[long_rows] if long_rows.any() else row_labels
    sink_fraction = float(np.mean(data["argmax_first"]))
    step_rows = row_labels == "step"
    drifts = rule_drifts(bins_df, context)
    best = min(drifts, key=lambda k: abs(drifts[k]))
    ties = [k for k in drifts if abs(abs(drifts[k]) - abs(drifts[best])) < 1e-9]
    ref = classify.reference_slopes(np.exp(np.exp(fit.log_log_n)))
    record = {
        "layer": layer, "head": head, "law": law, "domain": classify.LAW_DOMAIN.get(law, "undefined"),
        "profile_r2": float(median_profile[1]),
        **{f"rows_{lab}": float(np.mean(labelled == lab)) for lab in classify.LAWS},
        "gamma": fit.gamma, "gamma_low": fit.low, "gamma_high": fit.high,
        "gamma16": fit16.gamma, "gamma16_low": fit16.low, "gamma16_high": fit16.high,
        "nearest_reference": classify.nearest_reference(fit16.gamma, ref),
        "sink": sink_fraction >= classify.SINK_THRESHOLD, "sink_fraction": sink_fraction,
        "first_weight_mean": float(np.mean(data["first_weight"])),
        "planted_sink_rows": float(np.mean(step_rows & data["argmax_first"])),
        "c_median": float(np.median(c)), "c16_median": float(np.median(c16)),
        "beta_half_median": float(np.nanmedian(data["beta_half"])),
        "max_weight_median": float(np.median(values["max_weight"])),
        "entropy_median": float(np.median(values["entropy"])),
        "best_rule": "/".join(ties),
        **{f"drift_{k}": v for k, v in drifts.items()},
        "rows": int(len(n)),
    }
    profile_records = [{"layer": layer, "head": head, "k": k + 1, "r": float(r)}
                       for k, r in enumerate(median_profile)]
    return record, bins, curves, profile_records


BACKENDS = ("auto", "reference", "kernel", "kernel-interpreter")


def resolve_backend(backend: str) -> str:
    """``auto``: the fused kernel on CUDA when it is available, else the float64 reference on CPU."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    if backend == "auto":
        return "kernel" if kernel_available() else "reference"
    if backend == "kernel" and not kernel_available():
        raise ValueError("backend 'kernel' needs CUDA and critscale.kernels.qk_row_stats")
    return backend


def diagnose(loaded, text: str, *, max_len: int | None = None, max_windows: int = 8, n_min: int = N_MIN,
             progress: bool = True, seed: int = 0, backend: str = "auto") -> Diagnosis:
    """Run the diagnostic of theory.md §6 P-13 on ``loaded`` (a :class:`.load.LoadedModel`)."""
    backend = resolve_backend(backend)
    start = time.perf_counter()
    model = loaded.model
    length = _resolve_length(loaded.context, max_len)
    ids = tokenize_text(loaded.tokenizer, text)
    if max_windows < 1:
        raise ValueError(f"max_windows must be >= 1, got {max_windows}")
    wins = windows_of(ids, length, max_windows)
    L, H = loaded.n_layers, loaded.n_heads
    per_head: dict[tuple[int, int], list[dict]] = {(l, h): [] for l in range(L) for h in range(H)}
    window_of_rows: dict[tuple[int, int], list[np.ndarray]] = {(l, h): [] for l in range(L) for h in range(H)}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(wins) * L, desc="diagnose (window x layer)", unit="layer")
    for w, window in enumerate(wins):
        qk = capture_qk(model, window)
        for layer in range(L):
            if backend == "reference":
                logits = causal_logits(qk.q[layer].cpu(), qk.k[layer].cpu(), qk.scales[layer]).numpy()  # (H, T, T)
                head_stats = [row_statistics(logits[head, n_min - 1:]) for head in range(H)]  # rows n >= n_min
            else:
                kernel_backend = "triton-interpreter" if backend == "kernel-interpreter" else "triton-cuda"
                head_stats = kernel_row_statistics(qk.q[layer], qk.k[layer], qk.scales[layer], n_min,
                                                   backend=kernel_backend)
            for head, stats in enumerate(head_stats):
                per_head[(layer, head)].append(stats)
                window_of_rows[(layer, head)].append(np.full(len(stats["n"]), w))
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    stats_s = time.perf_counter() - start
    head_records, bin_records, curve_records, profile_records, row_frames = [], [], [], [], []
    for (layer, head), chunks in per_head.items():
        data = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
        windows = np.concatenate(window_of_rows[(layer, head)])
        rec, bins, curves, prof = summarise_head(layer, head, data, windows, loaded.context, seed)
        head_records.append(rec)
        bin_records += bins
        curve_records += curves
        profile_records += prof
        one = int(np.argmin(np.abs(BETA_GRID - 1.0)))
        row_frames.append(pd.DataFrame({
            "layer": layer, "head": head, "window": windows, "n": data["n"], "kappa": data["kappa"],
            "kappa16": data["kappa16"], "beta_half": data["beta_half"], "c": 1.0 / data["kappa"],
            "max_weight": data["max_weight"][:, one], "entropy": data["entropy"][:, one],
            "first_weight": data["first_weight"], "argmax_first": data["argmax_first"],
            "shape": classify.classify_profiles(classify.profile_of_gaps(data["top_gaps"]))[0]}))
    meta = {"checkpoint": loaded.checkpoint, "model": loaded.describe(), "tokens": int(len(ids)),
            "windows": len(wins), "window_length": int(len(wins[0])), "n_min": n_min, "backend": backend,
            "layers": L, "heads": H, "stats_seconds": round(stats_s, 2),
            "seconds": round(time.perf_counter() - start, 2), "beta_grid": BETA_GRID.tolist()}
    return Diagnosis(pd.DataFrame(head_records), pd.DataFrame(bin_records), pd.DataFrame(curve_records),
                     pd.DataFrame(profile_records), pd.concat(row_frames, ignore_index=True), meta)


def law_counts(diag: Diagnosis) -> dict[str, int]:
    """Number of heads per law (``linear``, ``power``, ``step``, ``undefined``)."""
    counts = diag.heads["law"].value_counts().to_dict()
    out = {law: int(counts.get(law, 0)) for law in classify.LAWS}
    if counts.get("undefined", 0):
        out["undefined"] = int(counts["undefined"])
    return out


def summary_text(diag: Diagnosis) -> str:
    """A short plain-text summary: law per head, sinks, operating points, rules."""
    h = diag.heads
    meta = diag.meta
    lines = [f"checkpoint: {meta['model']}",
             f"text: {meta['tokens']} tokens, {meta['windows']} window(s) of {meta['window_length']}, "
             f"rows with n >= {meta['n_min']}; {meta['seconds']:.1f} s",
             "heads per law: " + ", ".join(f"{k} {v}" for k, v in law_counts(diag).items()),
             f"sink heads (position 0 is the row max in >= half the rows): {int(h['sink'].sum())} of {len(h)}",
             f"operating point c = 1/kappa at the model's temperature: median over heads "
             f"{h['c_median'].median():.3g} (range {h['c_median'].min():.3g} to {h['c_median'].max():.3g})",
             "rule keeping c flat (heads): " + ", ".join(f"{k} {v}" for k, v in h["best_rule"].value_counts().items()),
             "", "layer head law     gamma [95% CI]        gamma16  c_med   p_max  sink  best rule"]
    for r in h.itertuples():
        lines.append(f"{r.layer:5d} {r.head:4d} {r.law:<8s} {r.gamma:6.2f} [{r.gamma_low:5.2f},{r.gamma_high:5.2f}]"
                     f"  {r.gamma16:7.2f}  {r.c_median:6.3f}  {r.max_weight_median:5.2f}  {'yes' if r.sink else 'no ':<4s}  "
                     f"{r.best_rule}")
    return "\n".join(lines)


def write_outputs(diag: Diagnosis, out_dir, *, figures: bool = True, rows: bool = False) -> list[Path]:
    """Write the per-head table (``heads.csv``) and its companions and figures into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in (("heads", diag.heads), ("bins", diag.bins), ("entropy_curves", diag.curves),
                        ("profiles", diag.profiles)):
        path = out / f"{name}.csv"
        frame.to_csv(path, index=False)
        written.append(path)
    if rows:
        path = out / "rows.csv.gz"
        diag.rows.to_csv(path, index=False)
        written.append(path)
    meta_path = out / "summary.json"
    meta_path.write_text(json.dumps({**diag.meta, "law_counts": law_counts(diag),
                                     "sink_heads": int(diag.heads["sink"].sum())}, indent=1))
    written.append(meta_path)
    (out / "summary.txt").write_text(summary_text(diag) + "\n")
    written.append(out / "summary.txt")
    if figures:
        from .figures import save_all

        written += save_all(diag, out)
    return written
