"""Extending a rotary-position model beyond its training length: temperature arms, their loss and their operating point.

A decoder trained at context length L is run at sL tokens (s = 2, 4, 8) with one *position treatment*
fixed across the comparison (:func:`positions`: plain RoPE, position interpolation, dynamic NTK or YaRN's
frequencies with ``attention_factor = 1``, all through the config's ``rope_parameters``), so that only the
logit temperature differs between *arms*.
Every arm multiplies layer l's logits at context length n by a factor f(l, n) inside the attention function
(:func:`critscale.models.temperature.tempered`), never through the rotary tables:

- ``none``: f = 1;
- ``sqrt_log``: f = sqrt(max(1, log n / log L)), the square root of Qwen's LogN;
- ``log``: f = max(1, log n / log L), Qwen's LogN, the clipped form of Scalable-Softmax's s log n with
  s = 1 / log L (1 inside the trained length, so that the arm acts only beyond it);
- ``yarn``: f = (0.1 ln s + 1)^2 at every position of a forward at sL (YaRN's temperature, which
  transformers puts on cos and sin; here on the logits instead);
- ``oracle``: the constant f (every position, every layer) with the lowest loss beyond L on tuning windows
  separate from the evaluation windows (:func:`oracle_temperature`), the ceiling of a constant temperature;
- ``schedule``: the diagnostic's per-layer schedule (:func:`critscale.diagnostic.schedule.layer_schedule`),
  computed from the model's heads on windows of length L only (:func:`schedule_from_heads`, which refuses
  to let the model read a longer input while it runs).

What is measured: per-token next-token loss (nats per byte) of each arm on the same evaluation windows
(:func:`token_losses`), grouped in position buckets [0, L), [L, 2L), ...; paired differences between arms
with bootstrap intervals over windows (:func:`paired_interval`); and per layer the operating point of the
rows as the arm makes them (median p_max, entropy and c = 1 / kappa_16 of the tempered logits, so
c = f / kappa_16 of the untempered ones; :func:`operating_points`).

The pre-registered criterion is :func:`criterion`'s (per position treatment, :func:`criteria`).
"""

from __future__ import annotations

import contextvars
import copy
import math
from contextlib import contextmanager

import numpy as np
import pandas as pd
import torch

from .models.temperature import NAME as TEMPERED, context_lengths, tempered, tempered_attention

TREATMENTS = ("none", "linear", "dynamic", "yarn")
TREATMENT_LABEL = {"none": "plain RoPE", "linear": "position interpolation", "dynamic": "dynamic NTK",
                   "yarn": "YaRN frequencies"}
LAW_ARMS = ("none", "sqrt_log", "log", "yarn")
ARMS = LAW_ARMS + ("oracle", "schedule")
ARM_LABEL = {"none": "none", "sqrt_log": "clipped √(log n / log L)", "log": "clipped log n / log L (LogN)",
             "yarn": "YaRN (0.1 ln s + 1)²", "oracle": "oracle constant", "schedule": "diagnostic schedule"}
# The same arms in a figure's tick labels, short enough for a phone's column (the captions say which is which).
ARM_SHORT = {"none": "none", "sqrt_log": "√ rule", "log": "LogN", "yarn": "YaRN", "oracle": "oracle",
             "schedule": "schedule"}
CRITERION_MULTIPLES = (4, 8)  # the lengths sL at which the schedule must match the best arm
CONFIDENCE = 0.95
CAPTURE = "critscale_extension_capture"  # no "sdpa" in the name (transformers would check that backend)


class ExtensionError(ValueError):
    """An input the context-extension experiment cannot use; the message names it."""


# ---------------------------------------------------------------- position treatments
def rope_parameters(treatment: str, s: float, trained_length: int, theta: float) -> dict:
    """The ``rope_parameters`` of ``treatment`` for a forward at ``s`` times the trained length.

    ``linear`` divides every rotary frequency by s.  ``yarn`` blends interpolated and original frequencies
    (YaRN's ramp) with ``attention_factor`` 1.0, so that transformers puts no temperature on cos and sin.
    ``dynamic`` is transformers' dynamic NTK with factor 1: a forward of n > L tokens gets the base
    theta (n / L)^(d / (d - 2)) (NTK-aware scaling at the forward's own length: the lowest frequency divided
    by n / L, the highest kept); with factor a the ratio n / L would become a n / L - a + 1, a stronger scaling.
    """
    if treatment not in TREATMENTS:
        raise ExtensionError(f"position treatment must be one of {', '.join(TREATMENTS)}, got {treatment!r}")
    if not s >= 1:
        raise ExtensionError(f"the extension factor s must be >= 1, got {s!r}")
    if treatment == "none" or s == 1:
        return {"rope_type": "default", "rope_theta": float(theta)}
    if treatment == "yarn":
        return {"rope_type": "yarn", "rope_theta": float(theta), "factor": float(s),
                "original_max_position_embeddings": int(trained_length), "attention_factor": 1.0}
    if treatment == "dynamic":
        return {"rope_type": "dynamic", "rope_theta": float(theta), "factor": 1.0}
    return {"rope_type": "linear", "rope_theta": float(theta), "factor": float(s)}


@contextmanager
def positions(model, treatment: str, s: float, trained_length: int):
    """Run ``model`` (a Llama-architecture causal LM) with ``treatment`` for length ``s * trained_length``.

    The config's ``rope_parameters`` are replaced and the rotary module rebuilt from them; both are put back
    after the block.  ``max_position_embeddings`` stays the trained length (dynamic NTK reads it).
    """
    base = getattr(model, "model", None)
    rotary = getattr(base, "rotary_emb", None)
    if rotary is None:
        raise ExtensionError(f"{type(model).__name__} has no rotary embedding (model.model.rotary_emb): "
                             "its positions cannot be extended through rope_parameters")
    config = model.config
    before = copy.deepcopy(config.rope_parameters)
    config.rope_parameters = rope_parameters(treatment, s, trained_length, before["rope_theta"])
    base.rotary_emb = type(rotary)(config).to(rotary.inv_freq.device)
    try:
        yield model
    finally:
        config.rope_parameters = before
        base.rotary_emb = rotary


# ---------------------------------------------------------------- temperature arms
def law_factor(arm: str, trained_length: int, s: float):
    """The factor ``f(layer, lengths)`` of a law arm (module docstring) for a forward at ``s`` x L."""
    log_l = math.log(trained_length)
    if arm == "none":
        return lambda layer, n: torch.ones(n.shape, dtype=torch.float32)
    if arm == "sqrt_log":
        return lambda layer, n: torch.sqrt(torch.clamp(torch.log(n.to(torch.float64)) / log_l, min=1.0)).float()
    if arm == "log":
        return lambda layer, n: torch.clamp(torch.log(n.to(torch.float64)) / log_l, min=1.0).float()
    if arm == "yarn":
        return constant_factor((0.1 * math.log(s) + 1.0) ** 2)
    raise ExtensionError(f"law arm must be one of {', '.join(LAW_ARMS)}, got {arm!r}")


def constant_factor(tau: float):
    """The factor ``tau`` at every layer and position."""
    return lambda layer, n: torch.full(n.shape, float(tau), dtype=torch.float32)


# ---------------------------------------------------------------- losses
def eval_windows(tokens, length: int, count: int, start: int = 0) -> np.ndarray:
    """``count`` consecutive non-overlapping windows ``(count, length)`` of ``tokens`` from ``start``."""
    tokens = np.asarray(tokens, dtype=np.int64)
    available = (len(tokens) - start) // length
    if count < 1 or available < count:
        raise ExtensionError(f"the held-out text holds {max(available, 0)} windows of {length} tokens after "
                             f"token {start}, {count} asked for (fewer windows or a longer text)")
    return tokens[start:start + count * length].reshape(count, length)


def token_losses(model, windows: np.ndarray, factor=None, batch: int = 4) -> np.ndarray:
    """Next-token loss (nats) ``(W, T - 1)`` of every position of ``windows`` ``(W, T)``, float64.

    Position i holds the loss of predicting token i + 1 from tokens 0..i (context length i + 1).
    ``factor`` (a :func:`tempered` factor) applies a temperature arm; None runs the model as it is.
    """
    ids = torch.as_tensor(np.asarray(windows), dtype=torch.long)
    out = []
    with torch.no_grad():
        for start in range(0, len(ids), batch):
            chunk = ids[start:start + batch]
            inputs, targets = chunk[:, :-1], chunk[:, 1:]
            mask = torch.ones_like(inputs)
            if factor is None:
                logits = model(input_ids=inputs, attention_mask=mask, use_cache=False).logits
            else:
                with tempered(model, factor):
                    logits = model(input_ids=inputs, attention_mask=mask, use_cache=False).logits
            logp = torch.log_softmax(logits.double(), dim=-1)  # (b, T - 1, V)
            out.append(-logp.gather(-1, targets[..., None]).squeeze(-1).numpy())
    return np.concatenate(out)


def bucket_means(losses: np.ndarray, trained_length: int) -> np.ndarray:
    """Mean loss per window and position bucket [0, L), [L, 2L), ... ``(W, buckets)``; the last may be partial."""
    width = losses.shape[1]
    edges = list(range(0, width, trained_length)) + [width]
    return np.stack([losses[:, a:b].mean(axis=1) for a, b in zip(edges[:-1], edges[1:])], axis=1)


def beyond_means(losses: np.ndarray, trained_length: int) -> np.ndarray:
    """Mean loss per window over the positions beyond the trained length, [L, end) ``(W,)``."""
    if losses.shape[1] <= trained_length:
        raise ExtensionError(f"no position beyond the trained length {trained_length} in windows of "
                             f"{losses.shape[1] + 1} tokens")
    return losses[:, trained_length:].mean(axis=1)


def _boot_index(windows: int, seed: int, reps: int) -> np.ndarray:
    return np.random.default_rng([seed, 14]).integers(0, windows, size=(reps, windows))


def bootstrap_mean(values, seed: int, reps: int = 2000) -> tuple[float, float, float]:
    """Mean of per-window ``values`` and its percentile 95% interval, bootstrap over windows."""
    values = np.asarray(values, dtype=np.float64)
    boot = values[_boot_index(len(values), seed, reps)].mean(axis=1)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(boot, [tail, 100 - tail])
    return float(values.mean()), float(low), float(high)


def paired_interval(a, b, seed: int, reps: int = 2000) -> tuple[float, float, float]:
    """Mean of ``a - b`` over windows (the same windows in both) and its bootstrap 95% interval."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ExtensionError(f"paired losses must come from the same windows: shapes {a.shape} and {b.shape}")
    return bootstrap_mean(a - b, seed, reps)


def oracle_temperature(model, windows: np.ndarray, trained_length: int, grid, batch: int = 4) -> tuple[float, list]:
    """The constant factor of ``grid`` with the lowest mean loss beyond L on ``windows`` (run inside :func:`positions`).

    Returns ``(best factor, [(factor, loss), ...])``.
    """
    scores = [(float(tau), float(beyond_means(token_losses(model, windows, constant_factor(tau), batch),
                                              trained_length).mean())) for tau in grid]
    return min(scores, key=lambda item: item[1])[0], scores


# ---------------------------------------------------------------- the schedule, from lengths <= L only
class LengthGuardError(RuntimeError):
    """The model was asked to read an input longer than the length the schedule may see."""


@contextmanager
def length_guard(model, limit: int):
    """Inside the block, any forward of ``model`` on more than ``limit`` tokens raises :class:`LengthGuardError`.

    Yields a dict with ``forwards`` (how many forwards ran) and ``longest`` (the longest input seen).
    """
    seen = {"forwards": 0, "longest": 0}

    def check(module, args, kwargs):
        ids = args[0] if args else kwargs.get("input")
        length = int(ids.shape[-1])
        if length > limit:
            raise LengthGuardError(f"the model was given {length} tokens while the schedule is computed from "
                                   f"lengths <= {limit}")
        seen["forwards"] += 1
        seen["longest"] = max(seen["longest"], length)

    handle = model.get_input_embeddings().register_forward_pre_hook(check, with_kwargs=True)
    try:
        yield seen
    finally:
        handle.remove()


def schedule_from_heads(model, windows: np.ndarray, *, seed: int, **options):
    """The diagnosis and per-layer schedule of ``model`` from ``windows`` ``(W, L)`` of held-out tokens.

    The model can read nothing longer than L while it runs (:func:`length_guard`); ``options`` go to
    :func:`critscale.diagnostic.pipeline.diagnose_windows`.  Returns ``(diagnosis, schedule, seen)``.
    """
    windows = np.asarray(windows)
    if windows.ndim != 2:
        raise ExtensionError(f"the schedule's windows must be 2-D (windows, L), got shape {windows.shape}")
    limit = int(model.config.max_position_embeddings)
    if windows.shape[1] > limit:
        raise ExtensionError(f"the schedule's windows have {windows.shape[1]} tokens, more than the trained "
                             f"length {limit}: it must be computed from lengths <= L")
    from .diagnostic.pipeline import diagnose_windows
    from .diagnostic.schedule import layer_schedule
    from .models.load import ByteTokenizer, LoadedModel

    loaded = LoadedModel(model, ByteTokenizer(), "extension model", "loaded", label="the trained Llama")
    with length_guard(model, windows.shape[1]) as seen:
        diag = diagnose_windows(loaded, windows, max_windows=len(windows), seed=seed, **options)
    return diag, layer_schedule(diag), dict(seen)


# ---------------------------------------------------------------- rows as an arm makes them
_CALLS: contextvars.ContextVar[list | None] = contextvars.ContextVar("critscale_extension_calls", default=None)


def _capturing(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """:func:`tempered_attention`, recording the layer, q, k (expanded to the query heads), scale and lengths it gets."""
    from .models.interface import repeat_kv

    calls = _CALLS.get()
    if calls is not None:
        groups = query.shape[1] // key.shape[1]
        calls.append({"layer": int(module.layer_idx), "query": query.detach(), "key": repeat_kv(key, groups).detach(),
                      "scaling": float(module.scaling if scaling is None else scaling),
                      "lengths": context_lengths(query, key, kwargs.get("position_ids")).detach()})
    return tempered_attention(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)


@contextmanager
def tempered_recording(model, factor):
    """Run ``model`` tempered by ``factor`` (:func:`tempered`) and record what each attention call received.

    Yields the list of calls (dicts of ``layer``, ``query`` (B, H, T, D), ``key`` (B, H, T, D), ``scaling``,
    ``lengths`` (B, T)).  The recorded q and k are those before the factor: :func:`arm_logits` applies it.
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(CAPTURE, _capturing)
    AttentionMaskInterface.register(CAPTURE, sdpa_mask)
    calls: list = []
    with tempered(model, factor):
        token = _CALLS.set(calls)
        model.set_attn_implementation(CAPTURE)
        try:
            yield calls
        finally:
            _CALLS.reset(token)
            model.set_attn_implementation(TEMPERED)


def arm_logits(call: dict, factor, rows: np.ndarray) -> np.ndarray:
    """Float64 logits ``(B, H, len(rows), T)`` of query positions ``rows`` of one call, multiplied by the arm's factor.

    Row i is ``factor(layer, n_i) * scaling * q_i . k_j`` for j <= i and ``-inf`` after it.
    """
    rows = np.asarray(rows, dtype=np.int64)
    q = call["query"][:, :, rows].double()  # (B, H, m, D)
    logits = call["scaling"] * (q @ call["key"].double().transpose(-1, -2))  # (B, H, m, T)
    lengths = call["lengths"][:, rows]  # (B or 1, m)
    f = torch.broadcast_to(torch.as_tensor(factor(call["layer"], lengths), dtype=torch.float64), lengths.shape)
    logits = logits * f[:, None, :, None]
    hidden = torch.arange(logits.shape[-1])[None, :] > torch.as_tensor(rows)[:, None]  # (m, T) keys after the query
    return logits.masked_fill(hidden, -math.inf).numpy()


def row_positions(width: int, trained_length: int, per_bucket: int, first: int = 16) -> np.ndarray:
    """``per_bucket`` query positions evenly spread in each bucket [0, L), [L, 2L), ... of ``width`` positions
    (none before ``first``, where kappa_16 has fewer than 16 keys)."""
    out = []
    for start in range(0, width, trained_length):
        stop = min(start + trained_length, width)
        out.append(np.unique(np.linspace(max(start, first), stop - 1, per_bucket).round().astype(np.int64)))
    return np.concatenate(out)


POINT_STATS = ("p_max", "entropy", "c")


def median_interval(values: np.ndarray, seed: int, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile 95% interval of the median over windows and heads of ``values`` ``(m, W, H)``, per row m.

    A replicate resamples the windows (the same ones for every row and head) and takes the median over the
    heads of the drawn windows.  Returns ``(low, high)``, each ``(m,)``.
    """
    m, windows, heads = values.shape
    drawn = values[:, _boot_index(windows, seed, reps)]  # (m, reps, W, H)
    medians = np.median(drawn.reshape(m, reps, windows * heads), axis=-1)  # (m, reps)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(medians, [tail, 100 - tail], axis=-1)
    return low, high


def operating_points(model, windows: np.ndarray, factor, trained_length: int, per_bucket: int = 8,
                     seed: int = 0, reps: int = 0) -> pd.DataFrame:
    """Per layer and query position, the medians over heads and windows of p_max, entropy and c under ``factor``.

    c = 1 / kappa_16 of the tempered row (the row's operating point in units of its accumulation scale).
    Columns ``layer, position, n, bucket, p_max, entropy, c``; with ``reps > 0`` also ``<stat>_low`` and
    ``<stat>_high``, the bootstrap 95% interval over windows of each median (:func:`median_interval`).
    """
    import critscale

    ids = torch.as_tensor(np.asarray(windows), dtype=torch.long)
    rows = row_positions(ids.shape[1], trained_length, per_bucket)
    with torch.no_grad(), tempered_recording(model, factor) as calls:
        model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
    records = []
    for call in calls:
        logits = arm_logits(call, factor, rows)  # (B, H, m, T)
        B, H, m, T = logits.shape
        flat = np.moveaxis(logits, 2, 0).reshape(m, B * H, T)  # (m, B*H, T)
        per_head = {key: np.empty((m, B, H)) for key in POINT_STATS}
        for i, position in enumerate(rows):
            block = flat[i][:, :position + 1]  # (B*H, n)
            stats = critscale.softmax_stats(block, np.array([1.0]))
            per_head["p_max"][i] = stats.max_weight[:, 0].reshape(B, H)
            per_head["entropy"][i] = stats.entropy[:, 0].reshape(B, H)
            per_head["c"][i] = (1.0 / critscale.accumulation_scale(block, K=16)).reshape(B, H)
        columns = {"layer": call["layer"], "position": rows, "n": rows + 1, "bucket": rows // trained_length}
        for key, values in per_head.items():
            columns[key] = np.median(values.reshape(m, B * H), axis=1)
            if reps > 0:
                columns[f"{key}_low"], columns[f"{key}_high"] = median_interval(values, seed, reps)
        records.append(pd.DataFrame(columns))
    return pd.concat(records, ignore_index=True)


def c_drift(points: pd.DataFrame, reference: pd.DataFrame, trained_length: int) -> float:
    """How far an arm moves c beyond L: the mean over layers of |median log c over positions >= L minus the
    reference's median log c over its positions < L| (the reference: the model as trained, at lengths <= L)."""
    beyond = points[points["position"] >= trained_length].groupby("layer")["c"].apply(lambda c: np.median(np.log(c)))
    inside = reference[reference["position"] < trained_length].groupby("layer")["c"].apply(
        lambda c: np.median(np.log(c)))
    if beyond.empty or not set(beyond.index) <= set(inside.index):
        raise ExtensionError("c drift needs positions beyond L in the arm's rows and every layer in the reference")
    return float(np.mean(np.abs(beyond - inside.loc[beyond.index])))


def relation(low: float, high: float, other: str) -> str:
    """How an arm compares with ``other`` from the 95% interval ``[low, high]`` of (arm - other)'s loss."""
    if low > 0:
        return f"worse than {other}"
    if high < 0:
        return f"better than {other}"
    return f"not distinguishable from {other}"


# ---------------------------------------------------------------- the pre-registered criterion
def spearman(x, y) -> float:
    """Spearman rank correlation of two equal-length sequences (NaN with fewer than 3 pairs or no spread)."""
    from scipy.stats import spearmanr

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(spearmanr(x, y).statistic)


def criterion(beyond: dict, *, seed: int, reps: int = 2000, multiples=CRITERION_MULTIPLES) -> dict:
    """The pre-registered criterion from per-window losses beyond L, ``beyond[s][arm]`` (arrays over the same windows).

    The schedule *predicts* if, at 4L and at 8L, the paired
    95% interval of its loss beyond L minus the best arm's loss beyond L reaches 0 (its loss is not
    distinguishably above the best arm's), and *fails* otherwise; beside it the Spearman rank correlation, over
    arms, between how far an arm moves c from its value inside the trained length (:func:`c_drift`) and its loss.
    With several position treatments crossed with the arms, :func:`criteria` evaluates it for each treatment on its
    own (a law that works with one treatment only is a finding).

    At each s of ``multiples`` the best arm is the one with the lowest mean loss; the schedule *holds* there if
    the lower end of the paired 95% interval of (schedule - best) is <= 0.  ``outcome`` is ``"predicts"`` if it
    holds at every s, else ``"fails"``.  Returns the outcome and, per s, the best arm, the paired difference
    and its interval.
    """
    per_length, holds = {}, []
    for s in multiples:
        arms = beyond.get(s) if s in beyond else beyond.get(str(s))
        if not arms or "schedule" not in arms:
            raise ExtensionError(f"the criterion needs the schedule's losses at {s}L; the record has "
                                 f"{sorted(arms) if arms else 'none'}")
        means = {arm: float(np.mean(v)) for arm, v in arms.items()}
        best = min(means, key=means.get)
        diff, low, high = paired_interval(arms["schedule"], arms[best], seed, reps)
        per_length[int(s)] = {"best": best, "difference": diff, "low": low, "high": high,
                              "holds": bool(low <= 0.0)}
        holds.append(low <= 0.0)
    return {"outcome": "predicts" if all(holds) else "fails", "lengths": per_length}


def criteria(beyond: dict, *, seed: int, reps: int = 2000, multiples=CRITERION_MULTIPLES) -> dict:
    """:func:`criterion` for each position treatment of ``beyond[treatment][s][arm]``, in the record's order."""
    if not beyond:
        raise ExtensionError("the criterion needs the losses of at least one position treatment")
    return {treatment: criterion(arms, seed=seed, reps=reps, multiples=multiples) for treatment, arms in beyond.items()}
