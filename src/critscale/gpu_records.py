"""Results that only a GPU can produce, committed as small data files under ``results/gpu/``.

Each file is JSON with a ``provenance`` block (device, driver, versions, commit, date,
wall time).  ``load`` validates that block against ``PROVENANCE_SCHEMA`` before any page
shows a number from it, and ``show_gpu_record_note`` labels the result on the page, so
that no reader mistakes a recorded GPU number for one computed by the page.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
from numbers import Real
from pathlib import Path

from .provenance import repo_root

# torch.cuda.get_device_name() of the accelerators a recorded run may come from.
KNOWN_GPU = re.compile(
    r"^(NVIDIA (GeForce )?(RTX |GTX |Quadro |TITAN )?[A-Z]{0,3}\d{2,4}[A-Za-z0-9 \-]*"
    r"|NVIDIA (GH|GB)\d{3}[A-Za-z0-9 \-]*|Tesla [A-Z]\d{2,4}[A-Za-z0-9 \-]*"
    r"|AMD Instinct MI\d{3}[A-Za-z0-9 \-]*)$"
)
# "2026-11-30T00:56:41Z" (ISO 8601) or "2026-11-30 00:37 UTC" (critscale.provenance)
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2})?(Z| UTC)?)?$")
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


class GpuRecordError(ValueError):
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


def validate(data: dict, name: str = "<record>") -> None:
    """Raise ``GpuRecordError`` naming the first provenance field that is missing or wrong.

    Fields: ``device`` a known GPU name (``KNOWN_GPU``), ``date_utc`` an ISO date not in
    the future, ``commit`` a hexadecimal sha that is an ancestor of HEAD (checked when the
    repository's full history is present), ``versions`` a mapping that names torch, and
    ``wall_time_s`` a non-negative number.
    """
    prov = data.get("provenance") if isinstance(data, dict) else None
    if not isinstance(prov, dict):
        raise GpuRecordError(f"{name}: no 'provenance' block")

    def fail(field: str, problem: str):
        raise GpuRecordError(f"{name}: provenance field '{field}' {problem}")

    for field in ("device", "date_utc", "commit", "versions", "wall_time_s"):
        if field not in prov:
            fail(field, "is missing")
    device = prov["device"]
    if not isinstance(device, str) or not KNOWN_GPU.match(device):
        fail("device", f"is {device!r}, not a known GPU name (e.g. 'NVIDIA H200')")
    date = prov["date_utc"]
    if not isinstance(date, str) or not ISO_DATE.match(date):
        fail("date_utc", f"is {date!r}, not an ISO date such as '2026-11-30T00:56:41Z'")
    if _parse_date(date) > dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1):
        fail("date_utc", f"is {date!r}, in the future")
    commit = prov["commit"]
    if not isinstance(commit, str) or not COMMIT.match(commit):
        fail("commit", f"is {commit!r}, not a git commit sha")
    if commit_in_history(commit) is False:
        fail("commit", f"is {commit!r}, not in this repository's history")
    versions = prov["versions"]
    if not isinstance(versions, dict) or not versions.get("torch"):
        fail("versions", f"is {versions!r}, not a mapping that names the torch version")
    wall = prov["wall_time_s"]
    if isinstance(wall, bool) or not isinstance(wall, Real) or not wall >= 0:
        fail("wall_time_s", f"is {wall!r}, not a non-negative number of seconds")


def load(name: str) -> dict | None:
    """The validated ``results/gpu/<name>.json``, or ``None`` when no GPU run was recorded.

    A file that exists but fails ``validate`` is an error, never shown as data.
    """
    path = gpu_results_dir() / f"{name}.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (ValueError, OSError) as err:  # invalid JSON or UTF-8, or not a readable file
        raise GpuRecordError(f"results/gpu/{path.name}: not valid JSON ({err})") from None
    validate(data, f"results/gpu/{path.name}")
    return data


def validate_all(folder: Path | None = None) -> list[str]:
    """Validate every ``*.json`` under ``results/gpu/``; the names of the files checked."""
    folder = folder or gpu_results_dir()
    names = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (ValueError, OSError) as err:  # invalid JSON or UTF-8, or not a readable file
            raise GpuRecordError(f"results/gpu/{path.name}: not valid JSON ({err})") from None
        validate(data, f"results/gpu/{path.name}")
        names.append(path.name)
    return names


def describe(data: dict) -> str:
    """One sentence naming where and when a recorded result was computed."""
    p = data["provenance"]
    versions = ", ".join(f"{k} {v}" for k, v in p["versions"].items())
    return (f"Recorded on {p['device']} ({versions}; driver {p.get('driver', 'not recorded')}), "
            f"commit `{p['commit']}`, {p['date_utc']}, wall time {p['wall_time_s']:.0f} s. "
            f"These numbers are GPU results read from `results/gpu/`, not recomputed by this build.")


def show_gpu_record_note(data: dict | None, what: str) -> None:
    """Display the note that labels a recorded GPU result on the page, or says none exists."""
    from IPython.display import Markdown, display

    if data is None:
        display(Markdown(f"> **{what}: no GPU run has been recorded** in `results/gpu/`; "
                         "run `make gpu-results` on a CUDA machine to produce it."))
    else:
        display(Markdown(f"> **{what} (GPU result).** {describe(data)}"))
