"""Results that only a GPU can produce, committed as small data files under ``results/gpu/``.

Each file is JSON with a ``provenance`` block (device, driver, versions, commit, date,
wall time).  A CPU build of the book shows them through ``banner`` so that no reader
mistakes a recorded GPU number for one computed by the page.
"""

from __future__ import annotations

import json
from pathlib import Path

from .provenance import repo_root

REQUIRED_PROVENANCE = ("device", "date_utc", "commit", "wall_time_s")


def gpu_results_dir() -> Path:
    return repo_root() / "results" / "gpu"


def load(name: str) -> dict | None:
    """The parsed ``results/gpu/<name>.json``, or ``None`` when no GPU run was recorded.

    A file that exists but lacks its provenance is an error, never shown as data.
    """
    path = gpu_results_dir() / f"{name}.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    prov = data.get("provenance", {})
    missing = [k for k in REQUIRED_PROVENANCE if k not in prov]
    if missing:
        raise ValueError(f"{path} has no provenance fields {missing}; refusing to show it")
    return data


def describe(data: dict) -> str:
    """One sentence naming where and when a recorded result was computed."""
    p = data["provenance"]
    versions = ", ".join(f"{k} {v}" for k, v in p.get("versions", {}).items())
    return (f"Recorded on {p['device']} ({versions}; driver {p.get('driver', 'unknown')}), "
            f"commit `{p['commit']}`, {p['date_utc']}, wall time {p['wall_time_s']:.0f} s. "
            f"These numbers are GPU results read from `results/gpu/`, not recomputed by this build.")


def banner(data: dict | None, what: str) -> None:
    """Display a labelled note for a recorded GPU result, or say that none exists."""
    from IPython.display import Markdown, display

    if data is None:
        display(Markdown(f"> **{what}: no GPU run has been recorded** in `results/gpu/`; "
                         "run `make gpu-results` on a CUDA machine to produce it."))
    else:
        display(Markdown(f"> **{what} (GPU result).** {describe(data)}"))
