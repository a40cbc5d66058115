"""The diagnostic end to end: input -> q/k windows -> row statistics -> summaries beside nulls.

:func:`diagnose` (an already-loaded transformers model and texts), :func:`diagnose_model` (a
:class:`critscale.models.LoadedModel` and token ids) and :func:`diagnose_qk` (arrays
of queries and keys, prefix design) differ only in their source of q and k; all then call
:func:`diagnose_source`, which reads every head's rows, reads the null heads over the same design
(:mod:`.nulls`) with the same code, summarises every unit (:mod:`.summary`) and returns a
:class:`Diagnosis`.  Writing it is the report stage (:mod:`.report`).
The null stage (:func:`read_nulls`) depends on the heads only through a :class:`NullPlan` (design, head
dimension, windows, logit spread), which the diagnosis keeps: :func:`with_null_seed` redraws its nulls
from another seed without reading the model again.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from . import budget, inference, laws, nulls as nulls_module, summary
from .design import Design, DesignError, make_design
from .qkfile import validate_qk
from .rows import BETA_GRID, MODEL_BETA, block_statistics, resolve_backend
from .windows import BLOCK_ELEMENTS, ArraySource, ModelSource

WINDOWS = 32  # default number of windows
NULL_WINDOW_FACTOR = 4  # nulls read this many times the input's windows (at least MIN_NULL_WINDOWS)
MIN_NULL_WINDOWS = 32
HEAD_SEED = 0  # seed of every head's window bootstrap (its interval does not change with the null seed)
RULE_NULL_WINDOWS = 512  # by default the rules' reference nulls read at least this many windows
RULE_REFERENCES = frozenset(null for table in nulls_module.RULE_NULLS.values() for null in table.values())
ROW_COLUMNS = ("unit", "layer", "head", "window", "level", "n", "query", "kappa", "kappa16", "beta_half",
               "p_max", "entropy", "first_weight", "argmax_first", "spread", "degenerate", "law")


@dataclass
class Diagnosis:
    """Everything the diagnostic computed.  Per-unit frames have ``unit``, ``layer``, ``head``
    columns; null units are named after the null and have ``layer = head = -1``."""

    heads: pd.DataFrame  # one line per head
    nulls: pd.DataFrame  # one line per null head, the same columns plus description and known law
    bins: pd.DataFrame  # per unit and level: medians of p_max, entropy, beta_half, kappa, kappa16, ...
    curves: pd.DataFrame  # entropy and p_max against beta, per unit and level (medians)
    profiles: pd.DataFrame  # median scale-free gap profile per unit
    rows: pd.DataFrame | None = None  # one line per row (heads and nulls), when asked for
    meta: dict = field(default_factory=dict)
    replicates: pd.DataFrame | None = None  # the null distribution: one line per subset of null windows (:mod:`.inference`)
    gamma_replicates: pd.DataFrame | None = None  # per head (index: unit), gamma's window-bootstrap slopes (columns: replicate)
    head_records: list[dict] | None = field(default=None, repr=False)  # the heads' summaries before the audit
    plan: "NullPlan | None" = field(default=None, repr=False)  # what the null stage read but its seed (with_null_seed)


def _concatenate(chunks: list[dict]) -> dict:
    return {key: np.concatenate([c[key] for c in chunks]) for key in chunks[0]}


def _split_units(data: dict, n_heads: int) -> dict[tuple[int, int], dict]:
    """Rows grouped by (layer, head), in layer-major order."""
    unit = data["layer"] * n_heads + data["head"]
    order = np.argsort(unit, kind="stable")
    bounds = np.flatnonzero(np.diff(unit[order])) + 1
    out = {}
    for idx in np.split(order, bounds):
        key = (int(data["layer"][idx[0]]), int(data["head"][idx[0]]))
        out[key] = {k: v[idx] for k, v in data.items()}
    return out


def _row_frame(unit: str, layer: int, head: int, data: dict) -> pd.DataFrame:
    return pd.DataFrame({
        "unit": unit, "layer": layer, "head": head, "window": data["window"], "level": data["level"],
        "n": data["n"], "query": data["query"], "kappa": data["kappa"], "kappa16": data["kappa16"],
        "beta_half": data["beta_half"], "p_max": data["max_weight"][:, MODEL_BETA],
        "entropy": data["entropy"][:, MODEL_BETA], "first_weight": data["first_weight"],
        "argmax_first": data["argmax_first"], "spread": data["spread"], "degenerate": data["degenerate"],
        "law": summary.row_laws(data)},
        columns=list(ROW_COLUMNS))


def _read_source(source, design: Design, backend: str) -> dict:
    return _concatenate([block_statistics(block, backend) for block in source.blocks(design)])


def resolve_null_windows(null_windows, windows: int) -> int:
    """Windows of every null: ``null_windows`` checked (an integer >= 1), or the default for ``windows``."""
    if null_windows is None:
        return max(NULL_WINDOW_FACTOR * int(windows), MIN_NULL_WINDOWS)
    if isinstance(null_windows, (bool, np.bool_)) or not isinstance(null_windows, (int, np.integer)) \
            or null_windows < 1:
        raise DesignError(f"null_windows (--null-windows) must be an integer >= 1 (None for the default), "
                          f"got {null_windows!r}")
    return int(null_windows)


def resolve_rule_windows(null_windows, resolved: int) -> int:
    """Windows of the rules' reference nulls: ``null_windows`` when given, else at least :data:`RULE_NULL_WINDOWS`.

    Every head's rule is read against the same references, so their error is shared by all heads: read
    on many windows, it stays well below a head's (a few hundredths in gamma).
    """
    return int(resolved) if null_windows is not None else max(int(resolved), RULE_NULL_WINDOWS)


def check_memory(source, design: Design, nulls: tuple[str, ...], null_windows: int, *, keep_rows: bool,
                 windows_option: str, null_replicates: int = 0, rule_windows: int | None = None) -> None:
    """Refuse, before any allocation, a diagnosis whose heads or nulls need more memory than the machine has."""
    block = BLOCK_ELEMENTS if isinstance(source, ArraySource) else 0  # a model source reads one window a block
    L, H, W, d = (int(source.n_layers), int(source.n_heads), int(source.n_windows), int(source.head_dim))
    heads = budget.heads_bytes(L, H, W, d, design, keep_rows=keep_rows, block_elements=block)
    if not isinstance(source, ArraySource):
        heads += budget.capture_bytes(L, H, design.window_length, d)
    budget.check(heads, f"reading {L} layers x {H} heads x {W} windows ({windows_option})",
                 "read fewer windows, layers or heads")
    kinds = [nulls_module.NULLS[name].kind for name in nulls]
    need = budget.nulls_bytes(kinds, null_windows, d, design, keep_rows=keep_rows, block_elements=BLOCK_ELEMENTS,
                              workers=min(kinds.count("rows"), os.cpu_count() or 1))
    references = [name for name in nulls if name in RULE_REFERENCES]
    if references and rule_windows is not None and rule_windows > null_windows:  # those rows nulls read more windows
        need += budget.nulls_bytes(["rows"] * len(references), rule_windows, d, design, keep_rows=keep_rows,
                                   block_elements=BLOCK_ELEMENTS, workers=min(len(references), os.cpu_count() or 1))
    budget.check(need, f"null_windows {null_windows} (--null-windows) for {len(nulls)} null(s)",
                 "give fewer null windows or fewer nulls", beside=heads, beside_what="the heads")
    if null_replicates:
        chunk = inference.replicate_chunks(null_replicates, W, design.window_length, d, BLOCK_ELEMENTS)[0]
        replicates = budget.replicates_bytes(null_replicates, W, d, design, chunk=chunk, block_elements=BLOCK_ELEMENTS)
        budget.check(replicates, f"{null_replicates} Gaussian null replicates of {W} windows ({windows_option})",
                     "read fewer windows or give fewer null replicates", beside=heads + need,
                     beside_what="the heads and the nulls")


def read_replicates(design: Design, windows: int, count: int, head_dim: int, spread: float, *, seed: int,
                    backend: str) -> pd.DataFrame:
    """The null distribution of a head's statistics at ``windows`` windows: one line per subset of windows.

    ``count`` x ``windows`` independent Gaussian null windows are read over ``design`` (drawn a chunk of
    replicates at a time, :func:`.inference.replicate_chunks`) and pooled; the statistics are read on
    :data:`.inference.SUBSETS` random sets of ``windows`` of them (:func:`.summary.subset_records`).
    """
    rng = np.random.default_rng([seed, 97, 1009])
    chunks, done = [], 0
    for size in inference.replicate_chunks(count, windows, design.window_length, head_dim, BLOCK_ELEMENTS):
        source = nulls_module.replicate_source(design, windows, size, head_dim, spread, rng)
        data = _read_source(source, design, backend)
        data["window"] = (done + data["head"]) * int(windows) + data["window"]  # one pool of windows
        chunks.append(data)
        done += size
    return summary.subset_records(_concatenate(chunks), windows, inference.SUBSETS, rng)


NULL_SPREAD_WITHOUT_ROWS = 1.0  # logit spread of the q/k nulls when every row of the input is degenerate


def null_spread(data: dict) -> tuple[float, str]:
    """The q/k nulls' logit spread: the median spread of the input's non-degenerate rows, and where it came from.

    Degenerate rows (all logits equal) have spread 0 and would make the nulls degenerate too; when
    every row is degenerate there is no spread to copy and :data:`NULL_SPREAD_WITHOUT_ROWS` is used.
    """
    live = ~np.asarray(data["degenerate"], dtype=bool)
    if live.any():
        return float(np.median(data["spread"][live])), "the median spread of the input's non-degenerate rows"
    return NULL_SPREAD_WITHOUT_ROWS, (f"every row of the input is degenerate: the q/k nulls use logit spread "
                                      f"{NULL_SPREAD_WITHOUT_ROWS:g}")


@dataclass(frozen=True)
class NullPlan:
    """What a diagnosis's null stage reads, all but its seed: the nulls of another seed are read from it alone,
    without reading the heads again (:func:`with_null_seed`)."""

    design: Design
    head_dim: int
    windows: int  # the input's windows: the replicates read as many, and intervals need laws.MIN_WINDOWS
    spread: float  # the q/k nulls' logit spread (:func:`null_spread`)
    spread_from: str
    nulls: tuple[str, ...]
    null_windows: int
    rule_windows: int
    null_replicates: int
    backend: str
    keep_rows: bool

    @property
    def intervals(self) -> bool:
        return self.windows >= laws.MIN_WINDOWS


def _summaries(units, *, seed: int, keep_rows: bool) -> dict:
    """Summaries of ``units`` ``(unit, layer, head, data)``: records, bins, curves, profiles, row frames, and the
    heads' gamma replicates.  Every head's bootstrap is drawn from one fixed stream, :data:`HEAD_SEED` (the seed
    draws the nulls, not the heads' intervals): replicate b resamples the same windows for every head, so
    statistics over heads are bootstrapped per replicate.  The nulls' bootstrap is drawn from ``seed``."""
    out = {"records": [], "bins": [], "curves": [], "profiles": [], "rows": [], "boots": {}}
    for unit, layer, head, unit_data in units:
        rec, b, c, p, boot = summary.summarise_unit(unit, layer, head, unit_data,
                                                    seed=seed if layer < 0 else HEAD_SEED)
        out["records"].append(rec)
        if layer >= 0:
            out["boots"][unit] = boot
        out["bins"] += b
        out["curves"] += c
        out["profiles"] += p
        if keep_rows:
            out["rows"].append(_row_frame(unit, layer, head, unit_data))
    return out


def read_nulls(plan: NullPlan, seed: int,
               on_null: Callable[[str], None] | None = None) -> tuple[dict, pd.DataFrame | None]:
    """The null heads of ``plan`` and its Gaussian null replicates, drawn from ``seed``: the nulls' summaries
    (:func:`_summaries`) and the replicates' subset statistics (None without a test: no replicates asked for,
    or too few windows for intervals)."""
    design = plan.design
    rngs = {name: np.random.default_rng([seed, 97, i]) for i, name in enumerate(plan.nulls)}
    row_nulls = [name for name in plan.nulls if nulls_module.NULLS[name].kind == "rows"]
    # the row nulls are numpy work on the CPU, which releases the GIL: they run in threads, beside the q/k nulls
    with ThreadPoolExecutor(max_workers=max(1, min(len(row_nulls), os.cpu_count() or 1))) as pool:
        pending = {name: pool.submit(nulls_module.family_statistics, name, design,
                                     plan.rule_windows if name in RULE_REFERENCES else plan.null_windows, rngs[name])
                   for name in row_nulls}
        null_data = {}
        for name in plan.nulls:
            if on_null is not None:
                on_null(name)
            if name not in pending:
                null_source = nulls_module.qk_source(name, design, plan.null_windows, plan.head_dim, plan.spread,
                                                     rngs[name])
                null_data[name] = _read_source(null_source, design, plan.backend)
        for name in row_nulls:
            null_data[name] = _concatenate(pending[name].result())
    units = [(name, -1, -1, null_data[name]) for name in plan.nulls]
    replicates = (read_replicates(design, plan.windows, plan.null_replicates, plan.head_dim, plan.spread, seed=seed,
                                  backend=plan.backend) if plan.null_replicates and plan.intervals else None)
    return _summaries(units, seed=seed, keep_rows=plan.keep_rows), replicates


def _audited(head_records: list[dict], nulls: dict, replicates, plan: NullPlan, seed: int) -> tuple:
    """The heads and the null table audited (:func:`.summary.audit`), and the meta that depends on the nulls."""
    table = pd.DataFrame(head_records + nulls["records"])
    heads, null_table = summary.audit(table[table["layer"] >= 0].reset_index(drop=True),
                                      table[table["layer"] < 0].reset_index(drop=True), replicates,
                                      intervals=plan.intervals, replicate_count=plan.null_replicates)
    lengths = np.array(plan.design.levels, dtype=np.float64)
    kappa16_lengths = lengths[lengths >= summary.KAPPA16_MIN_N]
    null_table.insert(3, "gamma_exact", [nulls_module.exact_slope(u, kappa16_lengths) for u in null_table["unit"]])
    rule_reference = [{"law": law, "rule": nulls_module.RULE_LABEL[rule], "null": null,
                       "rule_slope": nulls_module.rule_slope(rule, kappa16_lengths),
                       "null_gamma": float(null_table.set_index("unit")["gamma"].get(null, np.nan))}
                      for law, table in nulls_module.RULE_NULLS.items() for rule, null in table.items()]
    meta = {"null_replicates": plan.null_replicates if replicates is not None else 0,
            "heads_beyond_null": int((heads["beyond_null"] != "").sum()),
            "rule_counts": heads["best_rule"].value_counts().to_dict(),
            "rule_undecided_share": float((heads["best_rule"] == inference.UNDECIDED).mean()) if len(heads) else 0.0,
            "rule_reference": rule_reference, "seed": seed}
    return heads, null_table, meta


def diagnose_source(source, design: Design, *, describe: str, nulls=nulls_module.DEFAULT_NULLS,
                    null_windows: int | None = None, seed: int = 0, backend: str = "auto",
                    keep_rows: bool = False, meta: dict | None = None,
                    on_null: Callable[[str], None] | None = None, windows_option: str = "windows",
                    null_replicates: int = inference.NULL_REPLICATES) -> Diagnosis:
    """Read every head of ``source`` and the null heads over ``design``; summarise them all.

    ``null_replicates`` independent Gaussian q/k heads over the input's own design and windows give each
    head's test against the null (:mod:`.inference`; 0: no test).  ``seed`` draws the nulls and the
    replicates; every head's window bootstrap is drawn with :data:`HEAD_SEED`.  Every size is checked against the
    machine's memory first (:func:`check_memory`); ``windows_option`` names the option that set the
    input's windows in that message.  The heads are read first and the nulls after (:func:`read_nulls`), so
    :func:`with_null_seed` can redraw the nulls alone.
    """
    nulls = nulls_module.check_names(nulls)
    given = null_windows
    null_windows = resolve_null_windows(null_windows, source.n_windows)
    rule_windows = resolve_rule_windows(given, null_windows)
    null_replicates = inference.check_replicates(null_replicates)
    check_memory(source, design, nulls, null_windows, keep_rows=keep_rows, windows_option=windows_option,
                 null_replicates=null_replicates, rule_windows=rule_windows)
    backend = resolve_backend(backend)
    start = time.perf_counter()
    data = _read_source(source, design, backend)
    head_data = _split_units(data, source.n_heads)
    heads_seconds = time.perf_counter() - start
    spread, spread_from = null_spread(data)
    del data
    heads_part = _summaries([(f"L{l}H{h}", l, h, d) for (l, h), d in head_data.items()], seed=seed,
                            keep_rows=keep_rows)
    del head_data
    plan = NullPlan(design, int(source.head_dim), int(source.n_windows), spread, spread_from, nulls,
                    int(null_windows), int(rule_windows), null_replicates, backend, keep_rows)
    nulls_part, replicates = read_nulls(plan, seed, on_null)
    heads, null_table, null_meta = _audited(heads_part["records"], nulls_part, replicates, plan, seed)
    info = {**(meta or {}), "input": describe, "design": design.kind, "design_text": design.describe(),
            "levels": list(design.levels), "queries": design.queries, "causal": design.causal,
            "window_length": design.window_length, "windows": int(source.n_windows),
            "layers": int(source.n_layers), "heads": int(source.n_heads), "head_dim": int(source.head_dim),
            "nulls": list(nulls), "null_windows": int(null_windows), "rule_null_windows": int(rule_windows),
            "null_spread": spread,
            "null_spread_from": spread_from, "degenerate_heads": heads.loc[heads["degenerate"], "unit"].tolist(),
            "degenerate_threshold": summary.DEGENERATE_THRESHOLD,
            "kappa16_min_n": summary.KAPPA16_MIN_N, "law_min_n": summary.LAW_MIN_N, "shape_k": laws.SHAPE_K,
            "min_windows_for_intervals": laws.MIN_WINDOWS, "intervals": plan.intervals,
            "null_replicates": null_meta["null_replicates"], "null_subsets": inference.SUBSETS,
            "flag_level": inference.FLAG_LEVEL,
            "rule_level": inference.RULE_LEVEL, "heads_beyond_null": null_meta["heads_beyond_null"],
            "rule_counts": null_meta["rule_counts"], "rule_undecided_share": null_meta["rule_undecided_share"],
            "crossover": list(summary.CROSSOVER), "backend": backend, "beta_grid": BETA_GRID.tolist(),
            "rule_reference": null_meta["rule_reference"], "heads_seconds": round(heads_seconds, 2),
            "seconds": round(time.perf_counter() - start, 2), "seed": seed}
    frames = [pd.DataFrame(heads_part[k] + nulls_part[k]) for k in ("bins", "curves", "profiles")]
    return Diagnosis(heads, null_table, *frames,
                     pd.concat(heads_part["rows"] + nulls_part["rows"], ignore_index=True) if keep_rows else None,
                     info, replicates, gamma_replicate_frame(heads_part["boots"]),
                     head_records=heads_part["records"], plan=plan)


def with_null_seed(diag: Diagnosis, seed: int) -> Diagnosis:
    """``diag``'s heads beside nulls and null replicates drawn from ``seed``: the heads are not read again.

    The heads' summaries (and their window bootstrap, drawn with :data:`HEAD_SEED`) are ``diag``'s; only the
    null stage (:func:`read_nulls`) and the audit are redone, so the difference between two such diagnoses is
    the null draw's alone (:func:`.calibration.seed_agreement`).
    """
    if diag.plan is None or diag.head_records is None:
        raise DesignError("this diagnosis keeps no null plan (it was not computed by diagnose_source, e.g. a "
                          "recorded run): its nulls cannot be redrawn")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise DesignError(f"seed must be an integer, got {seed!r}")
    start = time.perf_counter()
    plan, heads_units = diag.plan, set(diag.heads["unit"])
    nulls_part, replicates = read_nulls(plan, int(seed))
    heads, null_table, null_meta = _audited(diag.head_records, nulls_part, replicates, plan, int(seed))
    own = {name: frame[frame["unit"].isin(heads_units)] if len(frame) else frame
           for name, frame in (("bins", diag.bins), ("curves", diag.curves), ("profiles", diag.profiles))}
    frames = [pd.concat([own[k], pd.DataFrame(nulls_part[k])], ignore_index=True)
              for k in ("bins", "curves", "profiles")]
    rows = None
    if diag.rows is not None:
        rows = pd.concat([diag.rows[diag.rows["unit"].isin(heads_units)], *nulls_part["rows"]], ignore_index=True)
    meta = {**diag.meta, **null_meta, "null_seconds": round(time.perf_counter() - start, 2)}
    return Diagnosis(heads, null_table, *frames, rows, meta, replicates, diag.gamma_replicates,
                     head_records=diag.head_records, plan=plan)


def gamma_replicate_frame(boots: dict[str, np.ndarray]) -> pd.DataFrame | None:
    """Heads' gamma bootstrap replicates as one frame (index: unit), or None when no head has an interval."""
    width = max((len(b) for b in boots.values()), default=0)
    if width == 0:
        return None
    rows = {unit: b if len(b) == width else np.full(width, np.nan) for unit, b in boots.items()}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("unit")


def token_windows(tokens, length: int, max_windows: int) -> np.ndarray:
    """Consecutive non-overlapping windows ``(W, length)`` of ``tokens``; :class:`DesignError` if none fits."""
    tokens = np.asarray(tokens, dtype=np.int64)
    if isinstance(max_windows, bool) or int(max_windows) != max_windows or max_windows < 1:
        raise DesignError(f"the number of windows must be an integer >= 1, got {max_windows!r}")
    count = min(int(max_windows), len(tokens) // length)
    if count == 0:
        raise DesignError(f"the text is too short: {len(tokens)} tokens, one window needs {length} "
                          "(give a longer text or a smaller --max-len)")
    return tokens[:count * length].reshape(count, length)


def resolve_length(context: int, max_len: int | None, what: str = "") -> int:
    """The window length: ``max_len``, or min(1024, the model's context); checked against the context.

    ``what`` says what sets the context when it is not the position table (a sliding window,
    :func:`critscale.models.architectures.context_limit`); the message then names it.
    """
    if max_len is None:
        return min(1024, int(context))
    if max_len > context:
        where = f" ({what})" if what and what != "the model's context" else ""
        raise DesignError(f"--max-len {max_len} exceeds the model's context of {context} positions{where}")
    return int(max_len)


def _model_length(loaded, max_len: int | None) -> int:
    """:func:`resolve_length` for a loaded model, naming its sliding window when that is what limits it."""
    from critscale.models.architectures import context_limit

    return resolve_length(loaded.context, max_len, context_limit(loaded.config)[1])


def text_windows(tokenizer, texts, length: int, max_windows: int) -> np.ndarray:
    """Windows ``(W, length)`` cut from each text's own tokens (none spans two texts), at most ``max_windows``."""
    if isinstance(max_windows, bool) or int(max_windows) != max_windows or max_windows < 1:
        raise DesignError(f"the number of windows must be an integer >= 1, got {max_windows!r}")
    if isinstance(texts, str):
        texts = [texts]
    try:
        texts = list(texts)
    except TypeError:
        raise DesignError(f"texts must be a string or a sequence of strings, got {type(texts).__name__}") from None
    if not texts or not all(isinstance(t, str) for t in texts):
        raise DesignError("texts must be a non-empty string or sequence of strings")
    windows, total = [], 0
    for text in texts:
        tokens = np.asarray(tokenizer.encode(text), dtype=np.int64)
        total = max(total, len(tokens))
        count = min(len(tokens) // length, int(max_windows) - sum(len(w) for w in windows))
        if count > 0:
            windows.append(tokens[:count * length].reshape(count, length))
    if not windows:
        raise DesignError(f"the texts are too short: the longest has {total} tokens, one window needs {length} "
                          "(give longer texts or a smaller max_len)")
    return np.concatenate(windows)


def diagnose_model(loaded, tokens, *, max_len: int | None = None, max_windows: int = WINDOWS,
                   design: str = "suffix", queries: int = 4, nulls=nulls_module.DEFAULT_NULLS,
                   null_windows: int | None = None, seed: int = 0, backend: str = "auto",
                   keep_rows: bool = False, progress: bool = False, meta: dict | None = None,
                   null_replicates: int = inference.NULL_REPLICATES) -> Diagnosis:
    """The diagnostic of ``loaded`` (a :class:`critscale.models.LoadedModel`) on token ids ``tokens``."""
    length = _model_length(loaded, max_len)
    windows = token_windows(tokens, length, max_windows)
    return diagnose_windows(loaded, windows, max_windows=max_windows, design=design, queries=queries, nulls=nulls,
                            null_windows=null_windows, seed=seed, backend=backend, keep_rows=keep_rows,
                            progress=progress, meta=meta, null_replicates=null_replicates)


def diagnose_windows(loaded, windows: np.ndarray, *, max_windows: int = WINDOWS, design: str = "suffix",
                     queries: int = 4, nulls=nulls_module.DEFAULT_NULLS, null_windows: int | None = None,
                     seed: int = 0, backend: str = "auto", keep_rows: bool = False, progress: bool = False,
                     meta: dict | None = None, null_replicates: int = inference.NULL_REPLICATES) -> Diagnosis:
    """The diagnostic of ``loaded`` on token windows ``(W, T)``; the design is causal or not as the model's masks are.

    For an encoder (rows that see every key) a level ``n`` is its own forward of ``n`` tokens
    (:class:`.windows.ModelSource`).  A length rule read from such a model covers the lengths it read,
    at most its position table (BERT: 512 positions): positions beyond the table cannot be read at all.
    """
    from critscale.models.capture import rows_are_causal

    length = int(windows.shape[1])
    causal = rows_are_causal(loaded.model, windows[0])
    plan = make_design(design, length, queries=queries, causal=causal)
    source = ModelSource(loaded, windows, causal=causal)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(windows) * source.forwards_per_window(plan), desc="diagnose: forwards", unit="forward")
        source.on_forward = lambda: bar.update(1)
    try:
        diag = diagnose_source(source, plan, describe=loaded.describe(), nulls=nulls, null_windows=null_windows,
                               seed=seed, backend=backend, keep_rows=keep_rows, null_replicates=null_replicates,
                               windows_option=f"max_windows {max_windows} (--max-windows)",
                               meta={"checkpoint": loaded.checkpoint, "tokens": int(windows.size), **(meta or {})},
                               on_null=None if bar is None else (lambda name: bar.set_description(f"null {name}")))
    finally:
        if bar is not None:
            bar.close()
    diag.meta["text_loss"] = source.loss.as_dict()
    return diag


def diagnose(model, tokenizer, texts, *, max_len: int | None = None, max_windows: int = WINDOWS,
             design: str = "suffix", queries: int = 4, nulls=nulls_module.DEFAULT_NULLS,
             null_windows: int | None = None, seed: int = 0, backend: str = "auto", keep_rows: bool = False,
             progress: bool = False, meta: dict | None = None,
             null_replicates: int = inference.NULL_REPLICATES) -> Diagnosis:
    """The diagnostic of an already-loaded transformers ``model`` on ``texts`` (a string or a sequence of them).

    ``model`` is any transformers model whose attention goes through ``AttentionInterface`` (a decoder or
    an encoder), on any device or ``device_map``; ``tokenizer.encode`` turns each text into token ids,
    and windows of ``max_len`` tokens (default min(1024, the model's context)) are cut from each text.
    The model's attention implementation and training mode are put back afterwards.  Returns the
    :class:`Diagnosis` that ``critscale diagnose --model`` computes.
    """
    from critscale.models.architectures import check_config
    from critscale.models.load import LoadedModel

    config = getattr(model, "config", None)
    if config is None or not hasattr(model, "base_model") or not hasattr(model, "set_attn_implementation"):
        raise DesignError(f"model must be a transformers PreTrainedModel, got {type(model).__name__}")
    if not callable(getattr(tokenizer, "encode", None)):
        raise DesignError(f"tokenizer must have an encode method, got {type(tokenizer).__name__}")
    check_config(config)
    name = str(getattr(config, "name_or_path", "") or type(model).__name__)
    loaded = LoadedModel(model, tokenizer, name, "loaded")
    length = _model_length(loaded, max_len)
    windows = text_windows(tokenizer, texts, length, max_windows)
    training = model.training
    model.eval()
    try:
        return diagnose_windows(loaded, windows, max_windows=max_windows, design=design, queries=queries,
                                nulls=nulls, null_windows=null_windows, seed=seed, backend=backend,
                                keep_rows=keep_rows, progress=progress, meta=meta,
                                null_replicates=null_replicates)
    finally:
        model.train(training)


def diagnose_qk(q, k, scale=None, causal=True, *, queries: int = 4, nulls=nulls_module.DEFAULT_NULLS,
                null_windows: int | None = None, seed: int = 0, backend: str = "auto",
                keep_rows: bool = False, meta: dict | None = None,
                null_replicates: int = inference.NULL_REPLICATES) -> Diagnosis:
    """The diagnostic of queries and keys ``(layers, heads, windows, T, d_head)`` (format of :mod:`.qkfile`).

    A forward per window: the prefix design applies (:mod:`.design`).  ``scale`` defaults to
    ``1/sqrt(d_head)``; ``causal=False`` reads each query against the first n keys of its window.
    """
    arrays = validate_qk(q, k, scale, causal)
    layers, heads, windows, T, d = arrays.shape
    plan = make_design("prefix", T, queries=queries, causal=arrays.causal)
    source = ArraySource(arrays.q, arrays.k, arrays.scale, causal=arrays.causal)
    describe = (f"q/k arrays: {layers} layers x {heads} heads, {windows} windows of {T} tokens, d_head {d}, "
                f"scale {arrays.scale:.6g}, {'causal' if arrays.causal else 'not causal'}")
    return diagnose_source(source, plan, describe=describe, nulls=nulls, null_windows=null_windows, seed=seed,
                           backend=backend, keep_rows=keep_rows, meta=meta, windows_option="the q/k input's shape",
                           null_replicates=null_replicates)
