"""The GPU imports take only what checks out: `make gpu-import` and `make gpu-book-import`.

Each case starts from a valid tarball built here (``tests/gpu_tarballs.py``) and changes one thing.  A
refusal is exit status 2 with one line per problem, each naming the tarball and the member, never a
traceback, and leaves the destination exactly as it was (no staging folder left beside it either).
"""

import gzip
import json
import math
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import gpu_tarballs as gt

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts" / "gpu_session"), str(ROOT / "scripts")]  # the session plumbing, gpu_suite

import gpu_book  # noqa: E402
import gpu_import  # noqa: E402

MiB = 2**20
EARLIER = "earlier"


def earlier_dest(tmp_path: Path) -> Path:
    """A destination holding an earlier import: every result file and a book."""
    dest = tmp_path / "repo" / "results" / "gpu"
    (dest / "book").mkdir(parents=True)
    for name in gpu_import.RESULTS:
        (dest / name).write_text(EARLIER)
    (dest / "book" / "keep").write_text(EARLIER)
    return dest


def unchanged(dest: Path) -> bool:
    """The destination is the earlier import, and nothing was left beside it."""
    same = all((dest / n).read_text() == EARLIER for n in gpu_import.RESULTS)
    book = sorted(p.name for p in (dest / "book").iterdir()) == ["keep"]
    alone = sorted(p.name for p in dest.iterdir()) == sorted([*gpu_import.RESULTS, "book"])
    return same and book and alone and sorted(p.name for p in dest.parent.iterdir()) == ["gpu"]


def refused(rc: int, err: str, prefix: str, *words: str) -> None:
    """Exit 2, only one-line refusals (each with ``prefix``), every word of ``words`` named."""
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert lines and all(line.startswith(prefix) for line in lines), err
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)


def import_results(tmp_path, capsys, files=None, *, raw: bytes | None = None, extra=(), book=None):
    """Pack ``files`` (or write ``raw``) as gpu_results.tar.gz and import it; (rc, stderr, dest)."""
    session = tmp_path / "session"
    session.mkdir()
    if raw is not None:
        (session / "gpu_results.tar.gz").write_bytes(raw)
    elif files is not None:
        gt.pack(files, session / "gpu_results.tar.gz", extra)
    if book is not None:
        gt.pack(book, session / "gpu_book.tar.gz")
    dest = earlier_dest(tmp_path)
    rc = gpu_import.main([str(session), "--dest", str(dest)])
    return rc, capsys.readouterr().err, dest


def import_book(tmp_path, capsys, files=None, *, raw: bytes | None = None, extra=()):
    """Pack ``files`` (or write ``raw``) as gpu_book.tar.gz and run `gpu_book.py import`; (rc, stderr, dest)."""
    tar_path = tmp_path / "gpu_book.tar.gz"
    if raw is not None:
        tar_path.write_bytes(raw)
    else:
        gt.pack(files, tar_path, extra)
    dest = earlier_dest(tmp_path) / "book"
    rc = gpu_book.main(["import", str(tar_path), "--dest", str(dest)])
    return rc, capsys.readouterr().err, dest


def member(name: str, kind: bytes, **fields) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    return info


# ----------------------------------------------------------------------------------------------
# The results tarball
# ----------------------------------------------------------------------------------------------


def test_valid_results_replace_their_namesakes_and_nothing_is_left_beside(tmp_path, capsys):
    files = gt.results_files()
    rc, err, dest = import_results(tmp_path, capsys, files)
    assert rc == 0, err
    assert all((dest / n).read_bytes() == files[n] for n in gpu_import.RESULTS)
    assert (dest / "book" / "keep").read_text() == EARLIER  # the book is not part of this import
    assert sorted(p.name for p in dest.parent.iterdir()) == ["gpu"]


def _drop(name):
    def edit(files):
        del files[name]
    return edit


def _set(name, data):
    def edit(files):
        files[name] = data
    return edit


def _csv_edit(name, old, new):
    def edit(files):
        assert old in files[name]
        files[name] = files[name].replace(old, new, 1)
    return edit


def _prov(name="kernels_run.json", **changes):
    def edit(files):
        gt.with_provenance(files, name, **changes)
    return edit


def _json(name, fn):
    def edit(files):
        gt.edit_json(files, name, fn)
    return edit


# (case, edit of the valid files, words the refusal names).  Before, each of these was imported (exit 0)
# or ended in a traceback; the comment says which.
RESULT_CASES = [
    # imported: a 9-MB tarball unpacked a 2-GiB CSV; the limit is per file
    ("csv-over-its-limit", _set("kernels_bench.csv", b"point\n" + b"0" * (8 * MiB)), ["kernels_bench.csv", "limit"]),
    # imported: every file under its limit, all together over the total
    ("total-over-the-limit", lambda f: f.update({n: b" " * (7 * MiB) + f[n] for n in
                                                 ("kernels_bench.json", "kernels_bench.csv", "kernels_montecarlo.json",
                                                  "kernels_montecarlo.csv", "kernels_tests.json")}),
     ["add up to more than"]),
    ("missing-member", _drop("kernels_tests.log"), ["lacks kernels_tests.log"]),  # imported
    ("garbage-csv", _set("kernels_bench.csv", b"\x00\x01garbage\x02"), ["kernels_bench.csv"]),  # imported
    ("csv-not-utf8", _set("kernels_montecarlo.csv", b"family,n\n\xff\xfe,1\n"), ["kernels_montecarlo.csv", "UTF-8"]),
    ("csv-of-another-table", lambda f: f.update({"kernels_montecarlo.csv": f["kernels_bench.csv"]}),
     ["kernels_montecarlo.csv", "columns"]),  # imported
    ("csv-row-dropped", lambda f: f.update({"kernels_montecarlo.csv": b"".join(
        f["kernels_montecarlo.csv"].splitlines(keepends=True)[:-1])}), ["kernels_montecarlo.csv", "rows"]),
    ("csv-value-changed", _csv_edit("kernels_bench.csv", b",0.0503,", b",0.0603,"),
     ["kernels_bench.csv", "time_ms.median"]),  # imported
    ("csv-infinite-value", _csv_edit("kernels_montecarlo.csv", b",6.8,", b",inf,"),
     ["kernels_montecarlo.csv", "mean_entropy"]),  # imported
    ("log-not-utf8", _set("kernels_tests.log", b"45 passed\n\xff\xfe\n"), ["kernels_tests.log", "UTF-8"]),  # imported
    ("log-with-nul", _set("kernels_tests.log", b"45 passed\x00\n"), ["kernels_tests.log", "NUL"]),  # imported
    ("wall-time-infinity", _prov(wall_time_s=math.inf), ["kernels_run.json", "Infinity"]),  # imported
    ("nan-in-a-record", _json("kernels_bench.json", lambda d: d["records"][0]["time_ms"].update(median=math.nan)),
     ["kernels_bench.json", "NaN"]),  # imported
    ("wall-time-zero", _prov(wall_time_s=0), ["kernels_run.json", "wall_time_s"]),  # imported
    ("versions-without-triton", _prov(versions={"torch": "2.11.0", "python": "3.12.3", "numpy": "2.5.2"}),
     ["kernels_run.json", "versions", "triton"]),  # imported
    ("version-not-installed", _prov("kernels_tests.json", versions={**gt.provenance()["versions"],
                                                                    "numpy": "not installed"}),
     ["kernels_tests.json", "numpy"]),  # imported
    ("json-list", _set("kernels_bench.json", b"[1, 2]"), ["kernels_bench.json", "list"]),  # AttributeError
    ("json-invalid", _set("kernels_montecarlo.json", b'{"setup": '), ["kernels_montecarlo.json", "not valid JSON"]),
    ("json-not-utf8", _set("kernels_tests.json", b'{"a": "\xff"}'), ["kernels_tests.json", "UTF-8"]),  # traceback
    ("date-not-of-the-calendar", _prov(date_utc="2026-13-45T00:00:00Z"), ["kernels_run.json", "date_utc"]),
    ("run-without-parts", _json("kernels_run.json", lambda d: d.pop("parts")), ["kernels_run.json", "parts"]),
    ("bench-record-without-status", _json("kernels_bench.json", lambda d: d["records"][0].pop("status")),
     ["kernels_bench.json", "record 0"]),  # imported
    ("mc-series-of-another-length", _json("kernels_montecarlo.json",
                                          lambda d: d["results"][0]["mean_entropy"].pop()),
     ["kernels_montecarlo.json", "mean_entropy"]),  # imported
]


@pytest.mark.parametrize("case, edit, words", RESULT_CASES, ids=[c[0] for c in RESULT_CASES])
def test_results_import_refuses_content_that_does_not_check_out(tmp_path, capsys, case, edit, words):
    files = gt.results_files()
    edit(files)
    rc, err, dest = import_results(tmp_path, capsys, files)
    refused(rc, err, "gpu_import: refusing gpu_results.tar.gz: ", *words)
    assert unchanged(dest)


def _gz(data: bytes) -> bytes:
    return gzip.compress(data)


def _valid_tarball(tmp_path) -> bytes:
    return gt.pack(gt.results_files(), tmp_path / "valid.tar.gz").read_bytes()


# (case, the tarball's bytes from a valid one, words).  Before: a traceback (tarfile's ReadError, EOFError)
# or, for the corrupt checksum, the empty tarball and the zeros after the end, an import (exit 0).
TARBALL_CASES = [
    ("empty-file", lambda valid: b"", ["empty file"]),
    ("not-gzip", lambda valid: b"kernels_bench.csv,1,2\n", ["not a gzip file"]),
    ("gzip-of-no-tar", lambda valid: _gz(b"hello, not a tar stream"), ["not a readable gzip tarball"]),
    ("truncated", lambda valid: valid[: len(valid) // 2], ["not a readable gzip tarball"]),
    ("corrupt-checksum", lambda valid: valid[:-8] + bytes(8), ["not a readable gzip tarball"]),
    ("empty-tarball", lambda valid: _gz(bytes(10240)), ["lacks kernels_bench.csv"]),  # imported nothing, exit 0
    ("header-declares-2-GiB", lambda valid: _gz(member("kernels_bench.csv", tarfile.REGTYPE, size=2**31).tobuf()),
     ["kernels_bench.csv", "limit"]),  # unpacking began; a traceback at the end of the data
    # imported: the files, then 48 MiB of zeros after the end of the tar stream, never read
    ("zeros-after-the-end", lambda valid: _gz(gzip.decompress(valid) + bytes(48 * MiB)), ["decompresses to more than"]),
]


@pytest.mark.parametrize("case, make, words", TARBALL_CASES, ids=[c[0] for c in TARBALL_CASES])
def test_results_import_refuses_a_tarball_it_cannot_read_in_one_line(tmp_path, capsys, case, make, words):
    rc, err, dest = import_results(tmp_path, capsys, raw=make(_valid_tarball(tmp_path)))
    refused(rc, err, "gpu_import: refusing gpu_results.tar.gz: ", *words)
    assert unchanged(dest)


def test_results_import_refuses_a_tarball_larger_than_a_session_packs(tmp_path, capsys):
    """An incompressible log makes the tarball itself larger than the GPU machine returns (before: imported)."""
    import os

    files = gt.results_files()
    files["kernels_tests.log"] = os.urandom(17 * MiB)
    rc, err, dest = import_results(tmp_path, capsys, files)
    refused(rc, err, "gpu_import: refusing gpu_results.tar.gz: ", "more than the 16.0 MiB")
    assert unchanged(dest)


# Members the tarfile data filter refused with a traceback.  The absolute name was refused before too (the
# filter unpacked it as tmp/..., then "tmp: not a file the session writes"); it stays to hold the name check.
MEMBER_CASES = [
    ("symbolic-link", member("kernels_tests.log", tarfile.SYMTYPE, linkname="/etc/passwd"), ["symbolic link"]),
    ("hard-link", member("kernels_tests.log", tarfile.LNKTYPE, linkname="../../etc/passwd"), ["hard link"]),
    ("fifo", member("kernels_tests.log", tarfile.FIFOTYPE), ["FIFO"]),
    ("device", member("kernels_tests.log", tarfile.CHRTYPE, devmajor=1, devminor=3), ["character device"]),
    ("outside-the-target", member("../kernels_tests.log", tarfile.REGTYPE, size=0), ["'../kernels_tests.log'"]),
    ("absolute-name", member("/tmp/kernels_tests.log", tarfile.REGTYPE, size=0), ["'/tmp/kernels_tests.log'"]),
]


@pytest.mark.parametrize("case, info, words", MEMBER_CASES, ids=[c[0] for c in MEMBER_CASES])
def test_results_import_refuses_members_that_are_not_plain_files_in_one_line(tmp_path, capsys, case, info, words):
    files = gt.results_files()
    del files["kernels_tests.log"]
    rc, err, dest = import_results(tmp_path, capsys, files, extra=[(info, b"" if info.isfile() else None)])
    refused(rc, err, "gpu_import: refusing gpu_results.tar.gz: ", *words)
    assert unchanged(dest)


def test_results_import_refuses_a_duplicate_member(tmp_path, capsys):
    files = gt.results_files()
    second = gt.with_provenance(dict(files), "kernels_run.json", wall_time_s=1.0)["kernels_run.json"]
    info = member("kernels_run.json", tarfile.REGTYPE, size=len(second))
    rc, err, dest = import_results(tmp_path, capsys, files, extra=[(info, second)])
    refused(rc, err, "gpu_import: refusing gpu_results.tar.gz: ", "kernels_run.json appears twice")
    assert unchanged(dest)


def test_the_suites_own_csv_of_a_real_table_passes_and_a_changed_value_does_not(tmp_path, capsys):
    """The CSV check compares the writer's output (pandas) with its JSON within 1e-9 relative: floats of
    every magnitude, ints, booleans, empty cells and lists pass; a value changed in its third digit does not."""
    records = gt.bench_records()
    records[0].update(tiny=1.25e-300, huge=6293317632.0, flag=False, few=[1, 2.5], none=None)
    data = gt._csv("kernels_bench", records)
    assert gpu_import.check_csv("kernels_bench.csv", data, gpu_import.bench_rows({"records": records})) == []
    changed = data.replace(b"1.25e-300", b"1.26e-300")
    assert changed != data
    assert "column tiny" in gpu_import.check_csv("kernels_bench.csv", changed,
                                                 gpu_import.bench_rows({"records": records}))[0]


# ----------------------------------------------------------------------------------------------
# The book tarball
# ----------------------------------------------------------------------------------------------


def test_valid_book_replaces_the_destination_whole(tmp_path, capsys):
    files = gt.book_files()
    rc, err, dest = import_book(tmp_path, capsys, files)
    assert rc == 0, err
    assert not (dest / "keep").exists()
    names = gt.book_names()
    assert sorted(p.stem for p in (dest / "executed").iterdir()) == names
    assert (dest / "provenance.json").read_bytes() == files["provenance.json"]
    assert sorted(p.name for p in dest.parent.parent.iterdir()) == ["gpu"]


def _bprov(**changes):
    def edit(files):
        gt.with_provenance(files, "provenance.json", **changes)
    return edit


FIRST = gt.book_names()[0]
NB = f"executed/{FIRST}.ipynb"


def _nb(**kwargs):
    return _set(NB, gt.notebook(FIRST, **kwargs))


def _nb_json(fn):
    return _json(NB, fn)


def _output(kind, **fields):
    from nbformat import v4

    return v4.new_output(kind, **fields)


def _markdown(text):
    from nbformat import v4

    return v4.new_markdown_cell(text)


def _failed_cell(nb):
    nb["cells"][1]["metadata"]["papermill"].update(status="failed", exception=True)


# (case, edit, words).  Before, every one of these was imported (exit 0), or, for the JSON list and the
# invalid JSON of provenance.json, ended in a traceback.
BOOK_CASES = [
    ("commit-unknown", _bprov(commit="unknown"), ["commit", "'unknown'"]),
    ("commit-not-of-this-history", _bprov(commit="0123456789ab"), ["not in this repository's history"]),
    ("device-cpu-only", _bprov(device="CPU only (x86_64, 16 cores)"), ["device", "CPU only"]),
    ("wall-time-slow", _bprov(wall_time_s="slow"), ["wall_time_s", "'slow'"]),
    ("wall-time-infinity", _bprov(wall_time_s=math.inf), ["provenance.json", "Infinity"]),
    ("versions-empty", _bprov(versions={}), ["versions"]),
    ("versions-without-papermill", _json("provenance.json", lambda p: p["versions"].pop("papermill")),
     ["versions", "papermill"]),
    ("date-yesterday", _bprov(date_utc="yesterday"), ["date_utc"]),
    ("date-not-of-the-calendar", _bprov(date_utc="2026-02-30T00:00:00Z"), ["date_utc"]),
    ("driver-none", _bprov(driver="none"), ["driver"]),
    ("imports-not-checked", _bprov(imports_not_checked=["torch"]), ["imports_not_checked"]),
    ("notebook-seconds-not-a-number", _json("provenance.json", lambda p: p["notebooks"][FIRST].update(seconds="x")),
     [FIRST, "seconds"]),
    ("provenance-names-an-extra-notebook", _json("provenance.json", lambda p: p["notebooks"].update(
        zz_extra={"status": "ok", "seconds": 1.0})), ["'zz_extra'", "the book does not have"]),
    ("provenance-a-json-list", _set("provenance.json", b"[]"), ["provenance.json", "list"]),
    ("provenance-invalid-json", _set("provenance.json", b'{"profile": '), ["provenance.json", "not valid JSON"]),
    ("extra-notebook", lambda f: f.update({"executed/zz_extra.ipynb": gt.notebook("zz_extra")}),
     ["executed/zz_extra.ipynb", "not a file the session writes"]),
    ("plain-text-ipynb", _set(NB, b"just some text\n"), [NB, "not valid JSON"]),
    ("json-that-is-no-notebook", _set(NB, b'{"cells": 3}'), [NB, "not a version-4 notebook"]),
    ("invalid-notebook", _set(NB, json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                              "cells": [{"cell_type": "code"}]}).encode()), [NB, "not a valid notebook"]),
    ("error-output", _nb(outputs=[_output("error", ename="ValueError", evalue="boom", traceback=[])]),
     [NB, "cell 1", "error output", "ValueError: boom"]),
    ("papermill-failed-cell", _nb_json(_failed_cell), [NB, "cell 1", "failed"]),
    ("html-script", _nb(outputs=[_output("display_data", data={"text/html": "<b>x</b><script>alert(1)</script>"})]),
     [NB, "cell 1", "text/html", "<script"]),
    ("glued-html-script", _nb(outputs=[_output("display_data", data={
        "application/papermill.record/text/html": "<SCRIPT src=x></SCRIPT>"})]), [NB, "<SCRIPT"]),
    ("svg-event-handler", _nb(outputs=[_output("display_data", data={
        "image/svg+xml": '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"></svg>'})]), [NB, "onload"]),
    ("svg-event-handler-in-a-phone-layout", _nb(outputs=[_output("display_data", data={"text/plain": "fig"}, metadata={
        "critscale/narrow": {"image/svg+xml": '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"></svg>'}})]),
     [NB, "onload"]),
    ("javascript-output", _nb(outputs=[_output("display_data", data={"application/javascript": "alert(1)"})]),
     [NB, "application/javascript"]),
    ("markdown-cell-script", _nb(extra_cells=[_markdown("<script>alert(1)</script>")]), [NB, "cell 2", "markdown"]),
    ("results-json-invalid", _set(f"results/{FIRST}.json", b"{"), [f"results/{FIRST}.json", "not valid JSON"]),
    ("results-of-another-notebook", _json(f"results/{FIRST}.json", lambda d: d.update(notebook="zz")),
     [f"results/{FIRST}.json", "'zz'"]),
    ("log-with-nul", _set(f"logs/{FIRST}.log", b"ok\x00"), [f"logs/{FIRST}.log", "NUL"]),
    ("figure-not-png", _set(f"results/figures/{FIRST}/a_fig.png", b"GIF89a"), ["a_fig.png", "not a PNG"]),
]


@pytest.mark.parametrize("case, edit, words", BOOK_CASES, ids=[c[0] for c in BOOK_CASES])
def test_book_import_refuses_content_that_does_not_check_out(tmp_path, capsys, case, edit, words):
    files = gt.book_files()
    edit(files)
    rc, err, dest = import_book(tmp_path, capsys, files)
    refused(rc, err, "gpu_book import: refusing gpu_book.tar.gz: ", *words)
    assert unchanged(dest.parent)


# Paths the scan missed before (it looked for "/root/" and the like after a quote or a space only).
MACHINE_PATHS = [
    ("file-url", "see file:///root/repo/src/critscale/a.py", "file://"),
    ("home-in-parentheses", "warning (/home/alice/critscale/a.py:3)", "/home/alice"),
    ("tmp-after-a-newline", "Traceback\n/tmp/pytest-of-root/x.py line 3", "/tmp/pytest"),
    ("users", "/Users/alice/critscale/a.py", "/Users/alice"),
    ("windows-user", "C:\\Users\\alice\\a.py", "C:\\\\Users"),
]


@pytest.mark.parametrize("case, text, shown", MACHINE_PATHS, ids=[c[0] for c in MACHINE_PATHS])
def test_book_import_refuses_machine_paths_in_any_form(tmp_path, capsys, case, text, shown):
    files = gt.book_files()
    _nb(outputs=[_output("stream", name="stderr", text=text)])(files)
    rc, err, dest = import_book(tmp_path, capsys, files)
    refused(rc, err, "gpu_book import: refusing gpu_book.tar.gz: ", NB, "absolute machine paths", shown)
    assert unchanged(dest.parent)


@pytest.mark.parametrize("text", ["results/gpu/kernels_bench.json", "https://example.org/home/page",
                                  "<repo>/src/critscale/a.py", "<python>/site-packages/numpy/x.py",
                                  "<cell>/3.py:1: RuntimeWarning", "a ratio 1/tmp2/3", "build/tmp/x", "~/home/x",
                                  "file://<repo>/book/x.html"])
def test_machine_path_scan_leaves_relative_paths_and_urls_alone(text):
    assert gpu_book.machine_paths({"outputs": [text], text: 1}) == []


def test_machine_path_scan_skips_base64_data_where_a_path_can_occur_by_chance():
    """An image's base64 (an output's image/png, a data: URI in an SVG) may hold "+/tmp/" by chance; a path
    beside it is still found."""
    blob = "iVBORw0KGgo" + "A" * 300 + "+/tmp/" + "B" * 300
    svg = f'<svg><image xlink:href="data:image/png;base64,{blob}"/></svg>'
    assert gpu_book.machine_paths({"image/png": blob, "image/svg+xml": svg}) == []
    assert gpu_book.machine_paths([svg + " /home/alice/x.py"]) == ["/home/alice/x.py"]


def test_book_import_refuses_a_symbolic_link_member_in_one_line(tmp_path, capsys):
    """Before: the data filter's AbsoluteLinkError as a traceback."""
    files = gt.book_files()
    del files[NB]
    rc, err, dest = import_book(tmp_path, capsys, files,
                                extra=[(member(NB, tarfile.SYMTYPE, linkname="/etc/passwd"), None)])
    refused(rc, err, "gpu_book import: refusing gpu_book.tar.gz: ", NB, "symbolic link")
    assert unchanged(dest.parent)


# ----------------------------------------------------------------------------------------------
# Both together: all or nothing
# ----------------------------------------------------------------------------------------------


def test_combined_import_changes_nothing_when_the_book_is_refused(tmp_path, capsys):
    """Before: the results replaced their namesakes, then the book was refused (exit 2)."""
    book = gt.book_files()
    _nb(outputs=[_output("error", ename="RuntimeError", evalue="no GPU", traceback=[])])(book)
    rc, err, dest = import_results(tmp_path, capsys, gt.results_files(), book=book)
    refused(rc, err, "gpu_import: refusing gpu_book.tar.gz: ", "error output")
    assert unchanged(dest)


def test_combined_import_reports_the_problems_of_both_tarballs(tmp_path, capsys):
    files = gt.results_files()
    _prov(wall_time_s=-1.0)(files)
    book = gt.book_files()
    _bprov(device="my laptop")(book)
    rc, err, dest = import_results(tmp_path, capsys, files, book=book)
    refused(rc, err, "gpu_import: refusing gpu_", "gpu_results.tar.gz: kernels_run.json",
            "gpu_book.tar.gz: provenance.json")
    assert unchanged(dest)


def test_combined_import_installs_both(tmp_path, capsys):
    files, book = gt.results_files(), gt.book_files()
    rc, err, dest = import_results(tmp_path, capsys, files, book=book)
    assert rc == 0, err
    assert all((dest / n).read_bytes() == files[n] for n in gpu_import.RESULTS)
    assert not (dest / "book" / "keep").exists() and (dest / "book" / "provenance.json").exists()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["gpu"]


def test_combined_import_undoes_its_renames_when_one_fails(tmp_path, capsys, monkeypatch):
    """A rename that fails halfway (here: the book's) puts back every file already replaced."""
    import gpu_intake

    real = gpu_intake.os.replace

    def failing(src, dst):
        if Path(dst).name == "book" and Path(src).parent.name != ".replaced" and "import-" in str(src):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(gpu_intake.os, "replace", failing)
    rc, err, dest = import_results(tmp_path, capsys, gt.results_files(), book=gt.book_files())
    assert rc == 1 and "nothing imported" in err and "Traceback" not in err, err
    assert unchanged(dest)


# ----------------------------------------------------------------------------------------------
# On the command line
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("script, make", [
    ("gpu_import.py", lambda tmp: (tmp / "s" / "gpu_results.tar.gz", b"not a tarball")),
    ("gpu_book.py", lambda tmp: (tmp / "gpu_book.tar.gz", None)),
])
def test_refusals_on_the_command_line_are_one_line_and_exit_2(tmp_path, script, make):
    """Before: a tarfile.ReadError traceback (exit 1) and a FileNotFoundError traceback."""
    path, data = make(tmp_path)
    if data is not None:
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        args = [str(path.parent), "--dest", str(tmp_path / "dest")]
    else:
        gt.pack({"provenance.json": b"[]"}, path)
        args = ["import", str(path), "--dest", str(tmp_path / "dest")]
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_session" / script), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert path.name in proc.stderr
    assert not (tmp_path / "dest").exists()


def test_a_tarball_that_is_no_file_is_refused_in_one_line(tmp_path, capsys):
    """Before: IsADirectoryError (a folder named gpu_results.tar.gz) and FileNotFoundError (a book tarball
    that is not there) as tracebacks."""
    (tmp_path / "session" / "gpu_results.tar.gz").mkdir(parents=True)
    dest = earlier_dest(tmp_path)
    rc = gpu_import.main([str(tmp_path / "session"), "--dest", str(dest)])
    refused(rc, capsys.readouterr().err, "gpu_import: refusing gpu_results.tar.gz: ", "not a regular file")
    rc = gpu_book.main(["import", str(tmp_path / "absent.tar.gz"), "--dest", str(dest / "book")])
    refused(rc, capsys.readouterr().err, "gpu_book import: refusing absent.tar.gz: ", "No such file")
    assert unchanged(dest)


# ----------------------------------------------------------------------------------------------
# The recorded results the book reads (critscale.page.gpu_results)
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make, words", [
    (lambda: json.dumps({"provenance": gt.provenance(wall_time_s=math.inf)}).encode(), "Infinity"),  # passed as >= 0
    (lambda: json.dumps({"provenance": gt.provenance(), "x": math.nan}).encode(), "NaN"),  # parsed
    (lambda: b'{"provenance": "\xff"}', "not UTF-8"),  # before: UnicodeDecodeError
], ids=["infinity", "nan", "not-utf8"])
def test_recorded_results_are_parsed_strictly(tmp_path, make, words):
    from critscale.page import gpu_results

    (tmp_path / "kernels_run.json").write_bytes(make())
    with pytest.raises(gpu_results.GpuResultError, match=words):
        gpu_results.validate_all(tmp_path)


@pytest.mark.parametrize("field, value", [("date_utc", "2026-02-30T00:00:00Z"), ("wall_time_s", math.inf),
                                          ("wall_time_s", 0.0), ("versions", {"torch": "2.11.0"}),
                                          ("versions", {**gt.provenance()["versions"], "triton": "not installed"})])
def test_recorded_results_provenance_values_are_checked(field, value):
    """Before: a date not of the calendar raised ValueError (a traceback in `check-gpu`); an infinite or zero
    wall time and versions naming torch alone passed."""
    from critscale.page import gpu_results

    with pytest.raises(gpu_results.GpuResultError, match=f"field '{field}'"):
        gpu_results.validate({"provenance": gt.provenance(**{field: value})}, "results/gpu/x.json")
