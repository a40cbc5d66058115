#!/usr/bin/env python3
"""Bring one GPU session's files into the repository, refusing anything that does not check out.

    python3 scripts/gpu_session/gpu_import.py DIR          # `make gpu-import DIR=...`

``DIR`` holds what ``scripts/gpu_session/gpu_session.sh`` packed: ``gpu_results.tar.gz`` (the kernel tests, the
benchmark and the Monte-Carlo) and, when the book part ran, ``gpu_book.tar.gz``.  Everything is checked
before anything is written.  The results tarball must hold exactly the seven files the session writes,
each within its size limit (read from the member headers, before any data is unpacked).  Each JSON is
strict (no ``Infinity`` or ``NaN``) and passes the provenance schema of ``critscale.page.gpu_results`` (a known
GPU, a commit of this repository's history, the versions, a finite wall time); the benchmark is of schema
``critscale-bench/2``; the Monte-Carlo was made by the generator version the kernels have now (rows of
another version are other rows).  Each CSV is the table of its JSON: the same columns, one row per record
and the same values.  The log is UTF-8 text.  The book tarball passes the checks of
``scripts/gpu_session/gpu_book.py import``.  Only then are the files staged beside ``--dest`` and renamed into place,
the results and the book together: a refusal, or a failure while writing, changes nothing.
Exit status 2 with one line per problem when it refuses.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from numbers import Real
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / "gpu_session"), str(ROOT / "scripts")]  # gpu_intake, gpu_suite

from gpu_intake import IntakeError, Layout, read_tarball, remove, staging_folder, strict_json, swap_in, text  # noqa: E402

RESULTS = ("kernels_tests.json", "kernels_tests.log", "kernels_bench.json", "kernels_bench.csv",
           "kernels_montecarlo.json", "kernels_montecarlo.csv", "kernels_run.json")
BENCH_SCHEMA = "critscale-bench/2"
MiB = 2**20
LIMITS = {".json": 8 * MiB, ".csv": 8 * MiB, ".log": 2 * MiB}
LAYOUT = Layout(limit=lambda name: LIMITS[Path(name).suffix] if name in RESULTS else None,
                folders=frozenset(), required=frozenset(RESULTS), total=32 * MiB, packed=16 * MiB)
MC_COLUMNS = ("family", "n", "rows", "generator_version", "c", "mean_collision", "se_collision", "mean_entropy",
              "se_entropy")
MC_SERIES = ("mean_collision", "se_collision", "mean_entropy", "se_entropy")
REL_TOL = 1e-9  # a CSV number against its JSON value (pandas writes the shortest round-trip form)


# ----------------------------------------------------------------------------------------------
# The JSON files
# ----------------------------------------------------------------------------------------------


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def check_bench(data: dict) -> list[str]:
    """Problems of ``kernels_bench.json`` beyond its provenance."""
    if data.get("schema") != BENCH_SCHEMA:
        return [f"schema {data.get('schema')!r}, expected {BENCH_SCHEMA!r}"]
    records = data.get("records")
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        return ["'records' is not a list of objects"]
    for i, r in enumerate(records):
        if not all(isinstance(r.get(k), str) and r.get(k) for k in ("point", "impl", "status")):
            return [f"record {i} lacks its point, impl or status"]
        if not (_is_count(r.get("n")) and _is_count(r.get("rows"))):
            return [f"record {i} ({r['point']} {r['impl']}): n and rows are not positive integers"]
        if r["status"] == "ok" and not (isinstance(r.get("time_ms"), dict) and _is_number(r["time_ms"].get("median"))
                                        and r["time_ms"]["median"] > 0):
            return [f"record {i} ({r['point']} {r['impl']}): status ok without a positive median time"]
    if not isinstance(data.get("errors"), list):
        return ["'errors' is not a list"]
    return []


def check_montecarlo(data: dict) -> list[str]:
    """Problems of ``kernels_montecarlo.json`` beyond its provenance."""
    from critscale.kernels import GENERATOR_VERSION

    setup = data.get("setup")
    version = setup.get("generator_version") if isinstance(setup, dict) else None
    if version != GENERATOR_VERSION:
        return [f"generator version {version!r}, the kernels' is {GENERATOR_VERSION}"]
    results = data.get("results")
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        return ["'results' is not a list of objects"]
    for i, r in enumerate(results):
        what = f"result {i} ({r.get('family')!r}, n={r.get('n')!r})"
        if not (isinstance(r.get("family"), str) and _is_count(r.get("n")) and _is_count(r.get("rows"))):
            return [f"{what}: family, n or rows missing or not positive"]
        if r.get("generator_version") != GENERATOR_VERSION:
            return [f"{what}: generator version {r.get('generator_version')!r}, the kernels' is {GENERATOR_VERSION}"]
        c = r.get("c")
        if not isinstance(c, list) or not c or not all(_is_number(v) for v in c):
            return [f"{what}: 'c' is not a list of finite numbers"]
        for key in MC_SERIES:
            series = r.get(key)
            if not isinstance(series, list) or len(series) != len(c) \
                    or not all(v is None or _is_number(v) for v in series):
                return [f"{what}: {key!r} is not a list of {len(c)} numbers"]
    return []


def check_tests(data: dict) -> list[str]:
    """Problems of ``kernels_tests.json`` beyond its provenance."""
    if isinstance(data.get("returncode"), bool) or not isinstance(data.get("returncode"), int):
        return ["'returncode' is not an integer"]
    counts = data.get("counts")
    if not isinstance(counts, dict) or not all(isinstance(v, int) and v >= 0 for v in counts.values()):
        return ["'counts' is not a mapping of status to count"]
    if not isinstance(data.get("cases"), list):
        return ["'cases' is not a list"]
    return []


def check_run(data: dict) -> list[str]:
    """Problems of ``kernels_run.json`` beyond its provenance."""
    parts = data.get("parts")
    if not isinstance(parts, dict) or not parts or not all(
            isinstance(v, dict) and isinstance(v.get("status"), str) for v in parts.values()):
        return ["'parts' is not a mapping of each part to its status"]
    return []


CHECKS = {"kernels_bench.json": check_bench, "kernels_montecarlo.json": check_montecarlo,
          "kernels_tests.json": check_tests, "kernels_run.json": check_run}


# ----------------------------------------------------------------------------------------------
# The CSV files: the table of their JSON
# ----------------------------------------------------------------------------------------------


def bench_rows(bench: dict) -> list[dict]:
    """The rows ``kernels_bench.csv`` holds: each record flattened as the writer flattens it."""
    from gpu_suite.output import flatten

    return [flatten(r) for r in bench["records"]]


def montecarlo_rows(mc: dict) -> list[dict]:
    """The rows ``kernels_montecarlo.csv`` holds: one per result and value of c."""
    return [{"family": r["family"], "n": r["n"], "rows": r["rows"], "generator_version": r["generator_version"],
             "c": cv, **{key: r[key][i] for key in MC_SERIES}} for r in mc["results"] for i, cv in enumerate(r["c"])]


def cell_matches(cell: str, value) -> bool:
    """Whether a CSV cell is how the writer (pandas) writes ``value`` of the JSON."""
    if value is None:
        return cell == ""
    if isinstance(value, bool):
        return cell == str(value)
    if isinstance(value, Real):
        try:
            number = float(cell)
        except ValueError:
            return False
        return math.isfinite(number) and math.isclose(number, float(value), rel_tol=REL_TOL, abs_tol=0.0)
    return cell == str(value)


def check_csv(name: str, data: bytes, expected: list[dict], columns: tuple[str, ...] = ()) -> list[str]:
    """Problems of a CSV file against the rows its JSON gives (at most the first mismatch)."""
    try:
        rows = list(csv.reader(io.StringIO(text(data, name), newline=""), strict=True))
    except IntakeError as err:
        return [str(err)]
    except csv.Error as err:
        return [f"{name}: not a CSV table ({err})"]
    if rows in ([], [[]]):
        return [] if not expected else [f"{name}: no header and no rows; the JSON has {len(expected)} rows"]
    header, body = rows[0], rows[1:]
    want = list(dict.fromkeys(k for row in expected for k in row)) or list(columns)
    if len(set(header)) != len(header) or set(header) != set(want):
        extra, lacking = sorted(set(header) - set(want)), sorted(set(want) - set(header))
        return [f"{name}: its columns are not those of the JSON (extra {extra}, missing {lacking})"]
    if len(body) != len(expected):
        return [f"{name}: {len(body)} rows, the JSON has {len(expected)}"]
    for i, (row, exp) in enumerate(zip(body, expected), start=2):
        if len(row) != len(header):
            return [f"{name}: line {i} has {len(row)} fields, the header {len(header)}"]
        for col, cell in zip(header, row):
            if not cell_matches(cell, exp.get(col)):
                return [f"{name}: line {i}, column {col}: {cell[:60]!r}, the JSON has {exp.get(col)!r}"[:300]]
    return []


# ----------------------------------------------------------------------------------------------
# The tarball
# ----------------------------------------------------------------------------------------------


def check_results(files: dict[str, bytes]) -> list[str]:
    """Problems of the results tarball's files (empty when they may be imported)."""
    from critscale.page.gpu_results import GpuResultError, validate

    problems, parsed = [], {}
    for name in sorted(n for n in files if n.endswith(".json")):
        try:
            data = parsed[name] = strict_json(files[name], name)
            validate(data, name, full_history=True)
        except (IntakeError, GpuResultError) as err:
            problems.append(str(err))
            continue
        problems += [f"{name}: {p}" for p in CHECKS[name](data)]
    try:
        text(files["kernels_tests.log"], "kernels_tests.log")
    except IntakeError as err:
        problems.append(str(err))
    bad = {p.split(":", 1)[0] for p in problems}
    for csv_name, rows in (("kernels_bench.csv", bench_rows), ("kernels_montecarlo.csv", montecarlo_rows)):
        source = csv_name.replace(".csv", ".json")
        if source in bad:
            problems.append(f"{csv_name}: not checked, its JSON is refused")
            continue
        columns = MC_COLUMNS if csv_name == "kernels_montecarlo.csv" else ()
        problems += check_csv(csv_name, files[csv_name], rows(parsed[source]), columns)
    return problems


def read_results(tarball: Path) -> dict[str, bytes]:
    """The checked files of a results tarball; :class:`IntakeError` with one line per problem otherwise."""
    files = read_tarball(tarball, LAYOUT)
    problems = check_results(files)
    if problems:
        raise IntakeError("\n".join(f"{tarball.name}: {p}" for p in problems))
    return files


def install(dest: Path, files: dict[str, bytes] | None, book: dict[str, bytes] | None) -> None:
    """Stage the results (into ``dest``) and the book (as ``dest/book``) beside ``dest``, then rename them
    into place together; on any failure nothing of ``dest`` has changed."""
    import gpu_book

    stage = staging_folder(dest)
    try:
        pairs = []
        for name in sorted(files or {}):
            (stage / name).write_bytes(files[name])
            pairs.append((stage / name, dest / name))
        if book is not None:
            gpu_book.stage_book(book, stage / "book")
            pairs.append((stage / "book", dest / "book"))
        dest.mkdir(parents=True, exist_ok=True)
        swap_in(pairs, stage / ".replaced")
    finally:
        remove(stage)


def shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", type=Path, help="the folder with gpu_results.tar.gz (and gpu_book.tar.gz)")
    ap.add_argument("--dest", type=Path, default=ROOT / "results" / "gpu", help="where the results go")
    args = ap.parse_args(argv)
    results, book = args.dir / "gpu_results.tar.gz", args.dir / "gpu_book.tar.gz"
    if not results.exists() and not book.exists():
        print(f"gpu_import: neither gpu_results.tar.gz nor gpu_book.tar.gz in {args.dir}", file=sys.stderr)
        return 2
    import gpu_book

    dest = args.dest.resolve()
    problems, files, book_files = [], None, None
    if results.exists():
        try:
            files = read_results(results)
        except IntakeError as err:
            problems += str(err).splitlines()
    if book.exists():
        try:
            book_files = gpu_book.read_book(book, "gpu")
        except IntakeError as err:
            problems += str(err).splitlines()
    if problems:
        print("\n".join(f"gpu_import: refusing {p}" for p in problems), file=sys.stderr)
        return 2
    try:
        install(dest, files, book_files)
    except OSError as err:
        print(f"gpu_import: nothing imported: cannot write beside {shown(dest)} ({err})", file=sys.stderr)
        return 1
    names = sorted(files or {}) + (["book/"] if book_files is not None else [])
    print(f"gpu_import: {', '.join(names)} -> {shown(dest)}")
    if book_files is not None:
        print(gpu_book.imported_line(book_files, dest / "book"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
