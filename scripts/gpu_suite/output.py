"""Writing the suite's files: JSON with a provenance block, flat CSV beside it."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from .provenance import provenance


def jsonable(x):
    """numpy scalars and arrays as plain Python; non-finite floats as ``null``; anything else as text."""
    import numpy as np

    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return jsonable(x.item())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, np.ndarray):
        return [jsonable(v) for v in x.tolist()]
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    return str(x)


def write_json(run, name: str, data: dict, started: float) -> Path:
    """``<out>/<name>.json`` with ``provenance`` added; returns its path."""
    data = dict(data)
    data["provenance"] = provenance(run, started)
    path = Path(run.out) / f"{name}.json"
    path.write_text(json.dumps(jsonable(data), indent=1))
    print(f"[gpu_suite] wrote {path} ({time.time() - started:.1f} s)", flush=True)
    return path


def flatten(record: dict, prefix: str = "") -> dict:
    """One CSV row from a nested record: ``{"time_ms": {"median": 1}}`` -> ``{"time_ms.median": 1}``."""
    row = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            row.update(flatten(value, name + "."))
        elif isinstance(value, (list, tuple)):
            row[name] = " ".join(str(v) for v in value)
        else:
            row[name] = value
    return row


def write_csv(run, name: str, records: list[dict]) -> Path:
    import pandas as pd

    path = Path(run.out) / f"{name}.csv"
    pd.DataFrame([flatten(jsonable(r)) for r in records]).to_csv(path, index=False)
    return path
