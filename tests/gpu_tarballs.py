"""Valid GPU session tarballs built in a test, to be mutated one defect at a time.

``results_files`` are the seven files of ``gpu_results.tar.gz`` (the CSVs written by the suite's own
writer, ``scripts/gpu_suite/output.py``), ``book_files`` the members of ``gpu_book.tar.gz`` (tiny
notebooks made with nbformat, as the build driver leaves them).  ``pack`` writes either as a tarball;
``with_provenance`` and ``edit_json`` change one field of a member.
"""

from __future__ import annotations

import functools
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(ROOT / "scripts"))

BOOK_VERSIONS = ("python", "torch", "triton", "transformers", "numpy", "scipy", "pandas", "matplotlib", "seaborn",
                 "papermill", "jupytext", "ipykernel", "nbclient", "nbformat")


@functools.lru_cache(maxsize=None)
def head() -> str:
    """HEAD of this checkout (a commit of its history)."""
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def provenance(**changes) -> dict:
    prov = {"device": "NVIDIA H200", "driver": "580.159.04", "versions": {"torch": "2.11.0+cu130", "triton": "3.6.0",
            "numpy": "2.5.2", "scipy": "1.18.1", "python": "3.12.3"}, "commit": head(),
            "date_utc": "2026-11-30T00:56:40Z", "wall_time_s": 12.5}
    prov.update(changes)
    return prov


def _csv(name: str, records: list[dict]) -> bytes:
    from gpu_suite.output import write_csv

    with tempfile.TemporaryDirectory() as tmp:
        return write_csv(SimpleNamespace(out=tmp), name, records).read_bytes()


def bench_records() -> list[dict]:
    point = {"point": "scores/grid32/n=2^8", "kind": "scores", "grid": "grid32", "n": 256, "rows": 8, "n_beta": 4,
             "n_t": 4}
    return [
        {**point, "impl": "kernel", "fields": ["log_z", "entropy"], "equal_work": True, "peak_extra_bytes": 1024,
         "first_call_s": 0.192, "error_vs_float64": {"reference_rows": 8, "log_z": {"max_rel": 3.1e-08}},
         "time_ms": {"median": 0.0503, "q25": 0.0499, "reps": 40, "method": "triton.testing.do_bench"},
         "status": "ok"},
        {**point, "impl": "eager", "fields": ["log_z", "entropy"], "equal_work": True, "peak_extra_bytes": None,
         "first_call_s": 1.5, "error_vs_float64": {"reference_rows": 8, "log_z": {"max_rel": 2.2e-08}},
         "time_ms": {"median": 0.75, "q25": 0.7, "reps": 40, "method": "triton.testing.do_bench"}, "status": "ok",
         "time_over_kernel": 14.9},
        {**point, "impl": "compile", "status": "skipped: time budget of 270 s spent"},
    ]


def montecarlo_results(generator: int) -> list[dict]:
    return [{"family": fam, "n": 1024, "log2_n": 10, "rows": 64, "seed": 7, "generator_version": generator,
             "kappa_bar": 3.2, "c": [0.25, 0.5, 1.0], "mean_collision": [0.001, 0.004, 0.3],
             "se_collision": [1e-05, 2e-05, None], "mean_entropy": [6.8, 6.1, 1.2], "se_entropy": [0.01, 0.02, 0.05]}
            for fam in ("gauss", "unif")]


def montecarlo_rows(results: list[dict]) -> list[dict]:
    """The CSV rows of scripts/gpu_suite/montecarlo.py: one per result and value of c."""
    return [{"family": r["family"], "n": r["n"], "rows": r["rows"], "generator_version": r["generator_version"],
             "c": cv, "mean_collision": r["mean_collision"][i], "se_collision": r["se_collision"][i],
             "mean_entropy": r["mean_entropy"][i], "se_entropy": r["se_entropy"][i]}
            for r in results for i, cv in enumerate(r["c"])]


def results_files(generator: int | None = None) -> dict[str, bytes]:
    """The seven files of a valid results tarball."""
    if generator is None:
        from critscale.kernels import GENERATOR_VERSION as generator
    records = bench_records()
    mc = montecarlo_results(generator)
    dump = lambda data: json.dumps(data, indent=1).encode()  # noqa: E731
    return {
        "kernels_bench.json": dump({"schema": "critscale-bench/2", "setup": {"mode": "full"}, "records": records,
                                    "errors": ["scores/grid32/n=2^8 compile: skipped: time budget of 270 s spent"],
                                    "provenance": provenance()}),
        "kernels_bench.csv": _csv("kernels_bench", records),
        "kernels_montecarlo.json": dump({"setup": {"generator_version": generator}, "results": mc, "errors": [],
                                         "provenance": provenance()}),
        "kernels_montecarlo.csv": _csv("kernels_montecarlo", montecarlo_rows(mc)),
        "kernels_tests.json": dump({"returncode": 0, "counts": {"passed": 45, "skipped": 29}, "cases": [],
                                    "provenance": provenance()}),
        "kernels_tests.log": b"45 passed, 29 skipped in 32.77s\n",
        "kernels_run.json": dump({"parts": {"tests": {"status": "done", "seconds": 40.5}},
                                  "wall_time_s": 99.7, "provenance": provenance()}),
    }


def book_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "notebooks").glob("*.md"))


def notebook(name: str, outputs: list | None = None, extra_cells: list | None = None) -> bytes:
    """A small executed notebook as the build driver writes it (papermill's metadata, one output)."""
    import nbformat
    from nbformat import v4

    nb = v4.new_notebook()
    result = v4.new_output("execute_result", data={"text/plain": "2"}, execution_count=1)
    code = v4.new_code_cell("x = 1\nx + 1", execution_count=1, outputs=[result] + list(outputs or []))
    code.metadata["papermill"] = {"status": "completed", "exception": False, "duration": 0.01}
    nb.cells = [v4.new_markdown_cell(f"# {name}"), code] + list(extra_cells or [])
    nb.metadata["papermill"] = {"exception": None, "duration": 1.5, "parameters": {}}
    return nbformat.writes(nb).encode()


def book_files(profile: str = "gpu") -> dict[str, bytes]:
    """The members of a valid book tarball: every notebook ok, with its results, log and a figure."""
    names = book_names()
    prov = {"profile": profile, "device": "NVIDIA H200", "driver": "580.159.04",
            "versions": {k: "1.2.3" for k in BOOK_VERSIONS}, "commit": head(), "date_utc": "2026-12-01T00:00:00Z",
            "wall_time_s": 300.0, "cores": 16, "jobs": 8, "imports_not_checked": [], "figures_packed": True,
            "notebooks": {nb: {"status": "ok", "seconds": 12.0, "estimate_s": 20.0, "threads": 2} for nb in names}}
    files = {"provenance.json": json.dumps(prov, indent=1).encode()}
    for nb in names:
        files[f"executed/{nb}.ipynb"] = notebook(nb)
        files[f"results/{nb}.json"] = json.dumps({"notebook": nb, "values": {"x": 1}}).encode()
        files[f"logs/{nb}.log"] = f"[ 1/14] {nb}  12.0 s\n".encode()
    files[f"results/figures/{names[0]}/a_fig.png"] = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    return files


def edit_json(files: dict[str, bytes], member: str, edit) -> dict[str, bytes]:
    """``files`` with ``edit(data)`` applied to the parsed JSON member (in place; returned for chaining)."""
    data = json.loads(files[member])
    edit(data)
    files[member] = json.dumps(data).encode()
    return files


def with_provenance(files: dict[str, bytes], member: str, **changes) -> dict[str, bytes]:
    """``files`` with fields of ``member``'s provenance block (or of ``provenance.json``) changed."""
    def edit(data):
        (data if member == "provenance.json" else data["provenance"]).update(changes)

    return edit_json(files, member, edit)


def _folders(names) -> list[str]:
    out = set()
    for name in names:
        parts = name.split("/")[:-1]
        out.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return sorted(out)


def pack(files: dict[str, bytes], path: Path, extra: list[tuple[tarfile.TarInfo, bytes | None]] = ()) -> Path:
    """``path`` (a .tar.gz) with a folder member for each folder, each file, then the ``extra`` members."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for folder in _folders(files):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for info, data in extra:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path
