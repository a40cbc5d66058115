"""Results that only a GPU can produce, committed as small data files under ``results/gpu/``.

Each file is JSON with a ``provenance`` block (device, driver, versions, commit, date,
wall time).  ``load`` parses the file strictly (``loads``: no ``Infinity`` or ``NaN``) and
checks the values of that block (``validate_provenance``) before any page shows a number
from it, and ``show_gpu_result_note`` labels the result on the page, so that no reader
mistakes a recorded GPU number for one computed by the page.  The imports of a GPU
session (``scripts/gpu_session/gpu_import.py``, ``scripts/gpu_session/gpu_book.py import``) use the same checks.
``load`` returns every record in the current schema: :func:`upgrade` is the one place where a file of an
older layout (the benchmark of schema 1, the diagnosis of the previous pipeline) is read as such;
:func:`bench_rows` gives chapter 12's rows.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import subprocess
from numbers import Real
from pathlib import Path

from .provenance import repo_root

BENCH_SCHEMA = "critscale-bench/2"

# torch.cuda.get_device_name() of the accelerators a recorded run may come from.
KNOWN_GPU = re.compile(
    r"^(NVIDIA (GeForce )?(RTX |GTX |Quadro |TITAN )?[A-Z]{0,3}\d{2,4}[A-Za-z0-9 \-]*"
    r"|NVIDIA (GH|GB)\d{3}[A-Za-z0-9 \-]*|Tesla [A-Z]\d{2,4}[A-Za-z0-9 \-]*"
    r"|AMD Instinct MI\d{3}[A-Za-z0-9 \-]*)$"
)
# "2026-11-30T00:56:41Z" (ISO 8601) or "2026-11-30 00:37 UTC" (critscale.page.provenance)
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2})?(Z| UTC)?)?$")
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
# "2.11.0+cu130", "3.12.3", "2.5.2": a release number, not "not installed" or "".
VERSION = re.compile(r"^\d+(\.\d+)*([a-z0-9.+\-]*)$", re.I)
# What every recorded GPU result was computed with (its provenance names each version).
REQUIRED_VERSIONS = ("python", "torch", "triton", "numpy")


class GpuResultError(ValueError):
    """A file under results/gpu/ that must not be shown: names the file and the field."""


def gpu_results_dir() -> Path:
    return repo_root() / "results" / "gpu"


def _parse_date(text: str) -> dt.datetime:
    stamp = text.replace(" UTC", "").replace("Z", "").replace("T", " ")
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return dt.datetime.strptime(stamp, fmt).replace(tzinfo=dt.timezone.utc)
        except ValueError:
            continue
    raise ValueError(text)


def commit_in_history(commit: str, root: Path | None = None) -> bool | None:
    """Whether ``commit`` is an ancestor of HEAD; ``None`` when no full history is at hand."""
    root = root or repo_root()
    try:
        shallow = subprocess.run(["git", "-C", str(root), "rev-parse", "--is-shallow-repository"],
                                 capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None  # not a git checkout (a source archive)
    if shallow == "true":
        return None
    found = subprocess.run(["git", "-C", str(root), "merge-base", "--is-ancestor", commit, "HEAD"],
                           capture_output=True, text=True)
    return found.returncode == 0


class _NonFinite(ValueError):
    pass


def _refuse_constant(constant: str):
    raise _NonFinite(constant)


def loads(text: str | bytes, name: str = "<record>"):
    """Parse UTF-8 JSON strictly (``Infinity``, ``-Infinity``, ``NaN`` refused); ``GpuResultError`` naming ``name``."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return json.loads(text, parse_constant=_refuse_constant)
    except UnicodeDecodeError as err:
        raise GpuResultError(f"{name}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    except _NonFinite as err:
        raise GpuResultError(f"{name}: holds the number {err}, which is not finite (JSON has no such number)") from None
    except json.JSONDecodeError as err:
        raise GpuResultError(f"{name}: not valid JSON ({err})") from None
    except RecursionError:
        raise GpuResultError(f"{name}: not valid JSON (nested too deeply)") from None


def _read(path: Path) -> bytes:
    """The bytes of a recorded file; ``GpuResultError`` when it cannot be read (a folder, no permission)."""
    try:
        return path.read_bytes()
    except OSError as err:
        raise GpuResultError(f"results/gpu/{path.name}: cannot be read ({err.strerror})") from None


def _finite_positive(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, Real) and math.isfinite(value) and value > 0


def validate_provenance(prov, name: str = "<record>", *, versions_required: tuple[str, ...] = REQUIRED_VERSIONS,
                        full_history: bool = False) -> None:
    """Raise ``GpuResultError`` naming the first provenance field that is missing or wrong.

    Fields: ``device`` a known GPU name (``KNOWN_GPU``), ``date_utc`` a valid ISO date not in
    the future, ``commit`` a hexadecimal sha that is an ancestor of HEAD (checked when the
    repository's full history is present; required to be checkable with ``full_history``),
    ``versions`` a mapping that names every package of ``versions_required`` with a version,
    and ``wall_time_s`` a finite positive number of seconds.
    """
    if not isinstance(prov, dict):
        raise GpuResultError(f"{name}: no 'provenance' block")

    def fail(field: str, problem: str):
        raise GpuResultError(f"{name}: provenance field '{field}' {problem}")

    for field in ("device", "date_utc", "commit", "versions", "wall_time_s"):
        if field not in prov:
            fail(field, "is missing")
    device = prov["device"]
    if not isinstance(device, str) or not KNOWN_GPU.match(device):
        fail("device", f"is {device!r}, not a known GPU name (e.g. 'NVIDIA H200')")
    date = prov["date_utc"]
    if not isinstance(date, str) or not ISO_DATE.match(date):
        fail("date_utc", f"is {date!r}, not an ISO date such as '2026-11-30T00:56:41Z'")
    try:
        when = _parse_date(date)
    except ValueError:
        fail("date_utc", f"is {date!r}, not a date of the calendar")
    if when > dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1):
        fail("date_utc", f"is {date!r}, in the future")
    commit = prov["commit"]
    if not isinstance(commit, str) or not COMMIT.match(commit):
        fail("commit", f"is {commit!r}, not a git commit sha")
    found = commit_in_history(commit)
    if found is False:
        fail("commit", f"is {commit!r}, not in this repository's history")
    if found is None and full_history:
        fail("commit", f"is {commit!r} and cannot be checked: this checkout has no full git history")
    versions = prov["versions"]
    lacking = [k for k in versions_required if not _is_version(versions.get(k))] if isinstance(versions, dict) \
        else list(versions_required)
    if not isinstance(versions, dict) or lacking:
        fail("versions", f"is {_short(versions)}, not a mapping that names the version of {', '.join(lacking)}")
    wall = prov["wall_time_s"]
    if not _finite_positive(wall):
        fail("wall_time_s", f"is {wall!r}, not a finite positive number of seconds")


def _is_version(value) -> bool:
    return isinstance(value, str) and bool(VERSION.match(value))


def _short(value, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def validate(data: dict, name: str = "<record>", *, full_history: bool = False) -> None:
    """Raise ``GpuResultError`` when ``data`` is not a JSON object whose ``provenance`` block passes
    :func:`validate_provenance`."""
    if not isinstance(data, dict):
        raise GpuResultError(f"{name}: a JSON {type(data).__name__}, not an object with a 'provenance' block")
    validate_provenance(data.get("provenance"), name, full_history=full_history)


def load(name: str) -> dict | None:
    """The validated ``results/gpu/<name>.json`` in the current schema (:func:`upgrade`), or ``None`` when no
    GPU run was recorded.

    A file that exists but fails ``validate`` is an error, never shown as data.
    """
    path = gpu_results_dir() / f"{name}.json"
    if not path.exists():
        return None
    data = loads(_read(path), f"results/gpu/{path.name}")
    validate(data, f"results/gpu/{path.name}")
    return upgrade(name, data)


def validate_all(folder: Path | None = None) -> list[str]:
    """Validate every ``*.json`` under ``results/gpu/``; the names of the files checked."""
    folder = folder or gpu_results_dir()
    names = []
    for path in sorted(folder.glob("*.json")):
        validate(loads(_read(path), f"results/gpu/{path.name}"), f"results/gpu/{path.name}")
        names.append(path.name)
    return names


def describe(data: dict) -> str:
    """One sentence naming where and when a recorded result was computed."""
    p = data["provenance"]
    versions = ", ".join(f"{k} {v}" for k, v in p["versions"].items())
    return (f"Recorded on {p['device']} ({versions}; driver {p.get('driver', 'not recorded')}), "
            f"commit `{p['commit']}`, {p['date_utc']}, wall time {p['wall_time_s']:.0f} s. "
            f"These numbers are GPU results read from `results/gpu/`, not recomputed by this build.")


def date_text(value: str) -> str:
    """A recorded date as the book writes dates, ``2026-11-30 00:56 UTC``, whether the record wrote
    ``2026-11-30T00:56:40Z`` or ``2026-11-30 00:56 UTC``."""
    from datetime import datetime, timezone

    text = str(value).strip().removesuffix(" UTC").replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"recorded date {value!r}: not an ISO date and time") from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def describe_in_box(data: dict) -> str:
    """The software of a recorded result, for a page's provenance box: versions, driver and wall time."""
    p = data["provenance"]
    versions = ", ".join(f"{k} {v}" for k, v in p["versions"].items())
    return f"{versions}; driver {p.get('driver', 'not recorded')}; wall time {p['wall_time_s']:.0f} s"


def note_text(data: dict | None, what: str, provenance_in_box: bool = False) -> str:
    """The note that labels a recorded GPU result on the page, or says none exists.

    With ``provenance_in_box`` the page's provenance box states where, when and with what the result was made
    (``describe_in_box``), and the note names only the device and points there."""
    if data is None:
        return (f"> **{what}: no GPU run has been recorded** in `results/gpu/`; "
                "run `make gpu-results` on a CUDA machine to produce it.")
    if provenance_in_box:
        return (f"> **{what} (GPU result).** Recorded on {data['provenance']['device']}; its commit, date and software "
                "are in the provenance box at the top. These numbers are read from `results/gpu/`, not recomputed by "
                "this build.")
    return f"> **{what} (GPU result).** {describe(data)}"


def show_gpu_result_note(data: dict | None, what: str, provenance_in_box: bool = False) -> None:
    """Display ``note_text(data, what, provenance_in_box)`` on the page."""
    from IPython.display import Markdown, display

    display(Markdown(note_text(data, what, provenance_in_box)))


def _work(r: dict) -> str:
    """What a benchmark record computes: all the kernel's fields, only the fields it names, or fewer fields
    (an upgraded schema-1 record, which named none)."""
    if r.get("equal_work"):
        return "all fields"
    return "only " + ", ".join(r["fields"]) if r.get("fields") is not None else "fewer fields"


def bench_rows(bench: dict) -> list[dict]:
    """The rows of chapter 12's benchmark tables: one per implementation and point of a benchmark of schema 2,
    each with the commit that timed it (``timed_at``, else the run's)."""
    commit = bench["provenance"]["commit"]
    names = {"grid32": r"32 \(\beta\) (ratio \(2^{1/8}\)), 64 \(t\)", "grid1": r"1 \(\beta\), 1 \(t\)",
             "grid32-geo": r"32 \(\beta\) (ratio 1.25), 64 \(t\)"}
    shorts = {"grid32": r"32 \(\beta\)", "grid1": r"1 \(\beta\)", "grid32-geo": r"32 \(\beta\), ratio 1.25"}
    out = []
    for r in bench["records"]:
        t = r.get("time_ms") or {}
        fl = r.get("floors") or {}
        err = (r.get("error_vs_float64") or {}).get("log_z") or (r.get("error_vs_float64") or {}).get("lse") or {}
        out.append({"kind": r["kind"], "grid": names.get(r["grid"], r["grid"]),
                    "grid_short": shorts.get(r["grid"], r["grid"]), "n": r["n"], "rows": r["rows"],
                    "impl": r["impl"], "work": _work(r),
                    "time_ms": t.get("median"), "q25": t.get("q25"), "q75": t.get("q75"),
                    "kernel_ms": (r.get("kernel_time") or {}).get("ms"), "floor": fl.get("largest"),
                    "floor_ms": 1e3 * fl["floor_s"] if fl.get("floor_s") else None, "err_log_z": err.get("max_rel"),
                    "timed_at": r.get("timed_at") or commit, "timing": t.get("method"),
                    "peak_extra_bytes": r.get("peak_extra_bytes"),
                    "status": r["status"]})
    return out


# ------------------------------------------------------------------ the one upgrade path
def upgrade(name: str, data: dict) -> dict:
    """``data`` of ``results/gpu/<name>.json`` in the current schema: a benchmark written before schemas
    (schema 1) is upgraded to :data:`BENCH_SCHEMA` (:func:`_bench_from_schema_1`), a diagnosis of the previous
    pipeline to the layout of ``scripts/gpu_gpt2.py`` (:func:`_diagnosis_from_previous_pipeline`); anything else
    is returned as it is.  Every reader gets records through :func:`load`, so no page reads an old layout."""
    if name.startswith("kernels_bench") and data.get("schema") is None:
        return _bench_from_schema_1(data, f"results/gpu/{name}.json")
    if name == "gpt2_small_attention" and "models" not in data:
        return _diagnosis_from_previous_pipeline(data, f"results/gpu/{name}.json")
    return data


# The kinds 1, 2, 3 and the implementation names of schema 1.
_KIND_NAMES_1 = {1: "scores", 2: "qk", 3: "sampled"}
_IMPLS_1 = {"triton": "kernel", "triton (1 beta, 1 threshold)": "kernel",
            "triton (fp32 inputs)": "kernel (fp32 inputs)", "torch.compile": "compile"}


def _floors_1(r: dict, setup: dict, ceil: dict) -> dict:
    """Seconds per floor of a schema-1 record, from that run's own count of the algorithm (one exp2 per score
    and beta, one FFMA counted as one instruction) and its measured ceilings."""
    nb = 1 if "1 beta" in r["impl"] else setup["n_beta"]
    scores = r["rows"] * r["n"]
    gen = 6 * scores if r["kind"] == 3 else 0  # lg2, sqrt, cos per generated Gaussian, in each of two passes
    fl = {"mufu": (scores * nb + gen) / ceil["exp2_per_s"], "fma": 4 * scores * nb / (ceil["fp32_fma_flops"] / 2)}
    if r["kind"] == 1:
        fl["hbm"] = 4 * scores / ceil["copy_bandwidth_Bps"]
    if r["kind"] == 2:
        fl["tensor"] = 2 * scores * setup["d"] / ceil["bf16_matmul_flops"]
    return fl


def _protocol_note_1(data: dict) -> str:
    """What the page says of a schema-1 benchmark: its protocol, against the current one."""
    prov = data["provenance"]
    earlier = (data["setup"].get("partial_rerun") or {}).get("earlier_provenance")
    kept = sum(1 for r in data["records"] if r.get("kept_from_earlier_run")
               and (earlier or {}).get("commit", "an earlier run") != prov["commit"])
    reps = [int(m.group(1)) for r in data["records"] if (m := re.search(r"median of (\d+)", r.get("timing") or ""))]
    text = ("The recorded benchmark was written by an older version of the script and of the kernels, "
            "before this protocol. ")
    if kept and earlier:
        text += (f"Its {len(data['records']) - kept} kernel rows were timed in that run; its {kept} eager and "
                 "torch.compile rows were kept from an earlier run (both commits are in the provenance box), so its "
                 "ratios compare two runs at two commits. ")
    text += ("Its baselines computed fewer fields than the kernels (no second-largest score, no minimum, no NaN check, "
             "no finishing step or bracket), ")
    if reps:
        text += f"calls over 40 ms were timed as the median of as few as {min(reps)} CUDA-event timings, "
    text += ("and it recorded no running clocks, power or temperature and no counters. "
             "Its 32 β were geometric from 0.05 to 50 (ratio 1.25), a grid without doubling pairs. "
             "The floors of the full table are those of its own count of the algorithm (one exp2 per score and β, "
             "one FFMA counted as one instruction), not of the compiled code.")
    return text


def _bench_from_schema_1(data: dict, name: str) -> dict:
    """A schema-1 benchmark in :data:`BENCH_SCHEMA`: kinds and implementations by name, the grids as ``grid1``
    and ``grid32-geo`` (its 32 geometric betas), each time as a median with its method, the floors of that run's
    own count, the commit that timed each row, and the run's protocol and memory notes in ``setup``.
    ``GpuResultError`` when the file is not of that layout."""
    try:
        setup, ceil, prov = data["setup"], data["ceilings"], dict(data["provenance"])
        if (setup["n_beta"], setup["n_t"]) != (32, 64):
            raise GpuResultError(f"{name}: a schema-1 grid of {setup['n_beta']} betas and {setup['n_t']} "
                                 "thresholds, not the 32 and 64 of its runs")
        earlier = (setup.get("partial_rerun") or {}).get("earlier_provenance") or {}
        earlier_commit = earlier.get("commit", "an earlier run")
        records = []
        for r in data["records"]:
            fl = _floors_1(r, setup, ceil)
            largest = max(fl, key=fl.get)
            impl = _IMPLS_1.get(r["impl"], r["impl"])
            records.append({
                "kind": _KIND_NAMES_1[r["kind"]], "grid": "grid1" if "1 beta" in r["impl"] else "grid32-geo",
                "n": r["n"], "rows": r["rows"], "impl": impl, "equal_work": impl.startswith("kernel"), "fields": None,
                "status": "ok" if r["time_ms"] else (r.get("error") or "no time"),
                "time_ms": {"median": r["time_ms"], "method": r["timing"]},
                "floors": {"largest": largest, "floor_s": fl[largest]},
                "peak_extra_bytes": r.get("peak_extra_bytes"),
                "timed_at": earlier_commit if r.get("kept_from_earlier_run") else prov["commit"]})
        clock = re.search(r"(\d+) MHz", prov.get("nvidia_smi", ""))
        if prov.get("max_sm_clock_mhz") is None and clock:  # nvidia-smi's clocks.max.sm
            prov["max_sm_clock_mhz"] = float(clock.group(1))
        notes = {"protocol_note": _protocol_note_1(data),
                 "memory_note": "qk grew with n because, at that commit, the snap distance took the key norms from an "
                                "fp32 copy of K; the current code uses a chunked pass instead."}
    except (KeyError, TypeError) as err:
        raise GpuResultError(f"{name}: not a benchmark of schema 1 either (field {err})") from None
    return {**data, "schema": BENCH_SCHEMA, "upgraded_from": 1, "setup": {**setup, **notes}, "provenance": prov,
            "records": records}


# The per-head columns of the previous pipeline, by the names of the current one.  Its ``gamma`` was the
# exponent of kappa (the current ``gamma_kappa``), its ``gamma16`` that of kappa_16 (the current ``gamma``).
_HEAD_COLUMNS_PREVIOUS = {"max_weight_median": "p_max", "first_weight_mean": "first_weight",
                          "entropy_median": "entropy", "beta_half_median": "beta_half", "c_median": "c",
                          **{f"gamma{s}": f"gamma_kappa{s}" for s in ("", "_low", "_high")},
                          **{f"gamma16{s}": f"gamma{s}" for s in ("", "_low", "_high")}}


def _pipeline_note_previous(meta: dict) -> str:
    """What the previous pipeline did that the calibrated one does not, and where the calibrated run stands."""
    return ("It read every row of each window, so the row length grew with the query's position; it read "
            f"$\\kappa_{{16}}$ from rows of n = {meta['n_min']} entries, where it is a statistic of the row's range; "
            "and with fewer than eight windows its intervals resampled rows, ignoring that the rows of a window share "
            "their keys. The calibrated run is prepared (it also reads the step-0 model and SmolLM2 at long contexts), "
            "and this section shows it once it is recorded.")


def _diagnosis_from_previous_pipeline(data: dict, name: str) -> dict:
    """A run of the previous pipeline (one trained model, no null heads) in the layout of ``scripts/gpu_gpt2.py``:
    its heads as model ``trained`` with the current column names, no null heads, its ``diagnose`` block as the
    model's ``meta``, its training and shape, ``pipeline`` = ``"previous"`` and the ``pipeline_note`` a page
    states.  Its bins, entropy curves and profiles are of that pipeline's own layout and are not carried.
    ``GpuResultError`` when the file is not of that layout."""
    try:
        heads = [{_HEAD_COLUMNS_PREVIOUS.get(k, k): v for k, v in h.items()} for h in data["heads"]]
        meta = dict(data["diagnose"])
        model = {"heads": heads, "nulls": [], "bins": [], "entropy_curves": [], "profiles": [], "meta": meta,
                 "training": data["training"], "train_config": data["train_config"]}
        note = _pipeline_note_previous(meta)
        provenance = data["provenance"]
    except (KeyError, TypeError, AttributeError) as err:
        raise GpuResultError(f"{name}: not a diagnosis of the previous pipeline either (field {err})") from None
    return {"provenance": provenance, "upgraded_from": "gpt2_small_attention", "pipeline": "previous",
            "pipeline_note": note, "complete": True, "errors": {}, "models": {"trained": model}}
