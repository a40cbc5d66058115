"""Tests of the book's build driver (critscale.bookbuild) and of the page-data helpers it relies on:
parameter checks, staged notebook runs, GPU record validation, the parameter box, code
folding, publication tables, figures, the downloadable wheel and source archive."""

from __future__ import annotations

import copy
import os
import json
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

from critscale.page import gpu_results, tables
from critscale.bookbuild import downloads, pages, params, staging, summaries
from critscale.bookbuild.__main__ import main
from critscale.bookbuild.notebook import Layout, execute, outputs

ROOT = Path(__file__).resolve().parents[1]

NOTEBOOK_HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A test page

```{code-cell} ipython3
:tags: [parameters]

profile = "cpu"   # the profile
rows = 4          # rows
scale = 1.5
fail = False
```

```{code-cell} ipython3
import matplotlib.pyplot as plt
import critscale as cs

cs.record("rows_seen", rows)
fig, ax = plt.subplots()
ax.plot([0, 1], [0, scale])
cs.record_figure("line_fig", fig)
if fail:
    raise RuntimeError("this cell fails on purpose")
```
"""


def _layout(tmp_path: Path, values: str, extra_cell: str = "") -> Layout:
    (tmp_path / "notebooks").mkdir()
    cell = f"\n```{{code-cell}} ipython3\n{extra_cell}```\n" if extra_cell else ""
    (tmp_path / "notebooks" / "x.md").write_text(NOTEBOOK_HEADER + cell)
    (tmp_path / "params" / "ci").mkdir(parents=True)
    (tmp_path / "params" / "ci" / "x.yaml").write_text(values)
    return Layout("ci", root=tmp_path)


# ---------------------------------------------------------------- parameter files (issue 14.9)
def test_unknown_parameter_fails_the_build_naming_the_key(tmp_path):
    """papermill alone runs `rowz: 16` with the default and exits 0; the driver must refuse it."""
    layout = _layout(tmp_path, "rowz: 16\n")
    with pytest.raises(params.ParameterError, match="unknown parameter 'rowz'"):
        execute(layout, "x")
    assert not any(p.exists() for p in outputs(layout, "x"))


@pytest.mark.parametrize("values, key", [("rows: 4.5\n", "rows"), ("rows: true\n", "rows"),
                                          ("scale: '1.5'\n", "scale"), ("fail: 1\n", "fail")])
def test_wrongly_typed_parameter_fails_naming_the_key(tmp_path, values, key):
    """A float for an int (``n: 1024.7``), a bool for an int, a string for a float, an int for a bool."""
    layout = _layout(tmp_path, values)
    with pytest.raises(params.ParameterError, match=f"parameter '{key}' is"):
        execute(layout, "x")


def test_parameter_types_accept_what_the_defaults_allow():
    known = params.defaults('a = 2**10\nb = 0.5\nc = [2, 16, "n"]\nd = None\n')
    assert known == {"a": 1024, "b": 0.5, "c": [2, 16, "n"], "d": None}
    params.check({"a": 4, "b": 3, "c": [4, "n"], "d": "anything"}, known, "f.yaml")
    with pytest.raises(params.ParameterError, match="parameter 'c'"):
        params.check({"c": [1.5]}, known, "f.yaml")


def test_every_params_file_of_the_project_fits_its_notebook():
    """Each params/<profile>/<nb>.yaml passes the driver's check (the build would refuse it)."""
    from critscale.bookbuild.notebook import checked_parameters, read_source

    for source in sorted((ROOT / "notebooks").glob("*.md")):
        nb = read_source(source)
        for profile in ("ci", "cpu", "gpu"):
            checked_parameters(Layout(profile, root=ROOT), source.stem, nb)


# ---------------------------------------------------------------- staged runs (issue 14.8)
def _previous_outputs(layout: Layout) -> dict[Path, str]:
    """Outputs of an earlier run of x (a stale figure among them), written by hand; path -> content."""
    files = {layout.executed / "x.ipynb": "previous notebook", layout.results / "x.json": "previous results",
             layout.results / "figures" / "x" / "old_fig.png": "previous figure"}
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return files


def _no_run_folders(layout: Layout) -> bool:
    """No staging folder or lock under build/staging/ci."""
    return not layout.staging.exists() or not any(layout.staging.iterdir())


def test_failed_notebook_leaves_nothing_behind(tmp_path):
    """Before the staging folder, a raising cell left the results JSON and the figure behind; the outputs
    of an earlier run are removed too (they are not of this source), and so are the run's own folders."""
    layout = _layout(tmp_path, "fail: true\n")
    _previous_outputs(layout)
    with pytest.raises(Exception, match="this cell fails on purpose"):
        execute(layout, "x")
    assert not any(p.exists() for p in outputs(layout, "x"))
    assert _no_run_folders(layout)


# After the reply to papermill's last request (kernel_info) has gone out, the kernel is still inside the
# request's handler; a loaded machine may deschedule it there.  This cell makes it stay there for a second.
SLOW_AFTER_REPLY = """import inspect, time
_kernel = get_ipython().kernel
_reply = _kernel.shell_handlers["kernel_info_request"]


async def _slow_after_reply(*args):
    result = _reply(*args)
    if inspect.isawaitable(result):
        await result
    time.sleep(1.0)


_kernel.shell_handlers["kernel_info_request"] = _slow_after_reply
"""


@pytest.mark.slow
def test_successful_run_is_quiet_and_puts_every_output_in_place(tmp_path):
    """One line on stdout (index, name, profile, time), nothing on stderr: no papermill
    'not specified with any extension', no ipykernel 'running over TCP' warning, and no
    '[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel.', which jupyter_client's shutdown_kernel
    caused by interrupting (SIGINT) a kernel still inside the handler of its last reply: the notebook's last
    cell keeps the kernel there for a second, as a loaded machine does by chance (and a CPU hog runs beside).
    The previous outputs are replaced, a stale figure of theirs removed, and no run folder is left."""
    layout = _layout(tmp_path, "rows: 7\n", extra_cell=SLOW_AFTER_REPLY)
    _previous_outputs(layout)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        run = subprocess.run([sys.executable, "-m", "critscale.bookbuild", "notebook", "x", "--profile", "ci"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
    finally:
        hog.kill()
        hog.wait()
    assert run.returncode == 0, run.stderr
    assert run.stderr == "", run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 1 and lines[0].split()[:4] == ["[", "1/1]", "x", "ci"], lines
    results = json.loads((layout.results / "x.json").read_text())
    assert results["values"]["rows_seen"] == 7
    assert (layout.results / results["figures"]["line_fig"]["png"]).exists()
    assert not (layout.results / "figures" / "x" / "old_fig.png").exists()
    assert nbformat.read(layout.executed / "x.ipynb", 4).cells and _no_run_folders(layout)


def _sockets_named_by(lock: Path) -> Path:
    return Path(lock.read_text().strip())


SLEEPING_CELL = """import os, pathlib, time
results = pathlib.Path(os.environ["CRITSCALE_RESULTS_DIR"])
(results / "started").touch()
deadline = time.monotonic() + {seconds}
while not (results / "release").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def _driver_in_its_sleeping_cell(layout: Layout, tmp_path: Path, **popen) -> subprocess.Popen:
    """A child driver running notebook x, returned once its sleeping cell has started.

    The cell sleeps until its ``seconds`` pass or a file ``release`` appears beside ``started`` (:func:`_release`)."""
    child = subprocess.Popen([sys.executable, "-m", "critscale.bookbuild", "notebook", "x", "--profile", "ci"],
                             cwd=tmp_path, **popen)
    deadline = time.monotonic() + 240
    while not list(layout.staging.glob("x.*/started")) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    if child.poll() is not None or not list(layout.staging.glob("x.*/started")):
        child.kill()
        child.wait()
        pytest.fail("the driver did not reach its sleeping cell")
    return child


def _release(layout: Layout) -> None:
    """End the sleeping cell of the running driver now."""
    for started in layout.staging.glob("x.*/started"):
        started.with_name("release").touch()


@pytest.mark.slow
def test_killed_run_keeps_the_previous_outputs_and_the_next_run_removes_its_folders(tmp_path):
    """SIGKILL of the driver while a cell runs: the previous outputs are still there, whole (the old driver
    had deleted them before the run), and the next run, even one refused for a bad parameter, removes the
    killed run's staging folder, its lock and its kernel-socket folder under the temporary folder."""
    layout = _layout(tmp_path, "rows: 7\n", extra_cell=SLEEPING_CELL.format(seconds=120))
    previous = _previous_outputs(layout)
    child = _driver_in_its_sleeping_cell(layout, tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert {p: p.read_text() for p in previous} == previous
    locks = list(layout.staging.glob("x.*.lock"))
    assert len(locks) == 1 and _sockets_named_by(locks[0]).is_dir()
    sockets = _sockets_named_by(locks[0])
    with pytest.raises(params.ParameterError, match="rowz"):
        execute(layout, "x", {"rowz": 1})
    assert _no_run_folders(layout) and not sockets.exists()
    assert {p: p.read_text() for p in previous} == previous


@pytest.mark.slow
def test_interrupted_run_prints_one_line_and_keeps_the_previous_outputs(tmp_path):
    """SIGINT of the driver while a cell runs: one line, exit status 130, the previous outputs whole, and
    the run's own folders removed (the old driver printed a KeyboardInterrupt traceback, had deleted the
    previous outputs before the run).  The driver acts on the signal when the running cell returns
    (nbclient waits for the kernel's reply in code that defers Python's signal handler), hence a cell that
    returns once the signal is sent (a cell of a fixed 5 s could end before a loaded machine sent it)."""
    layout = _layout(tmp_path, "rows: 7\n", extra_cell=SLEEPING_CELL.format(seconds=120))
    previous = _previous_outputs(layout)
    child = _driver_in_its_sleeping_cell(layout, tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True)
    child.send_signal(signal.SIGINT)
    _release(layout)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].split()[-1] == "interrupted" and out == "", (out, err)
    assert {p: p.read_text() for p in previous} == previous
    assert _no_run_folders(layout)


def test_next_run_removes_dead_runs_folders_and_leaves_live_ones(tmp_path):
    """A dead run's folders (a lock nobody holds, its staging folder, its socket folder), an older driver's
    staging folder (no lock) and a dead run's pending lock file are removed at the start of any run; the
    folders of a live run (its lock held, here by this process) are left alone."""
    layout = _layout(tmp_path, "rows: 7\n")
    live = staging.start(layout.staging, "y")
    dead = staging.start(layout.staging, "x")
    os.close(dead.fd)  # its process died: the lock is free, the folders stay
    (dead.stage / "x.json").write_text("{}")
    older = layout.staging / "z"
    older.mkdir()
    (older / "z.ipynb").write_text("{}")
    pending = layout.staging / ".x.1-00.lock.new"
    pending.write_text("")
    os.utime(pending, (time.time() - 2 * staging.PENDING_GRACE_S,) * 2)
    try:
        with pytest.raises(params.ParameterError, match="rowz"):
            execute(layout, "x", {"rowz": 1})
        assert not dead.stage.exists() and not dead.lock.exists() and not dead.sockets.exists()
        assert not older.exists() and not pending.exists()
        assert live.stage.is_dir() and live.lock.exists() and live.sockets.is_dir()
    finally:
        live.close()
    assert not live.sockets.exists() and _no_run_folders(layout)


def test_socket_folder_named_by_a_lock_is_removed_only_if_it_is_one_of_ours(tmp_path):
    """A lock file is read from the build folder: a path it names outside the temporary folder, or without
    the critscale-kernel- prefix, is never removed."""
    root = tmp_path / "staging"
    root.mkdir()
    keep = tmp_path / "critscale-kernel-not-in-tmp"
    keep.mkdir()
    other = Path(tempfile.mkdtemp(prefix="someone-else-"))
    try:
        for i, target in enumerate((keep, other)):
            (root / f"x.{i}.lock").write_text(str(target))
        staging.clean(root)
        assert keep.is_dir() and other.is_dir() and not list(root.iterdir())
    finally:
        other.rmdir()


# ---------------------------------------------------------------- the command line's refusals (issue 18.4)
@pytest.mark.parametrize("argv, fragment", [
    (["notebook", "x", "--profile", "/abs/dir"], "--profile '/abs/dir' (or $PROFILE): not a profile name"),
    (["notebook", "x", "--profile", "../ci"], "not a profile name"),
    (["notebook", "x", "--profile", "nope"], "no folder params/nope/"),
    (["html", "--profile", "/abs/dir"], "not a profile name"),
    (["notebook", "y", "--profile", "ci"], "no notebook notebooks/y.md"),
    (["notebook", "x", "--profile", "ci", "--set", "rows=[1"], "--set 'rows=[1': the value is not valid YAML"),
])
def test_refused_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, argv, fragment):
    """``--profile /abs/dir`` gave a 12-line ValueError traceback and exit 1 (the profile was joined to
    params/ as a path); each refusal is one line naming the input."""
    _layout(tmp_path, "rows: 7\n")
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0] and "Traceback" not in err[0], err


@pytest.mark.parametrize("argv", [["notebook"], ["notebook", "x", "--bogus"], [], ["nope"]])
def test_command_line_errors_are_one_line_without_the_usage_block(argv, capsys):
    """argparse printed its usage block (3 to 5 lines) before the error."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "usage" not in err[0], err


@pytest.mark.parametrize("what, bad, fragment", [
    ("params", b"\xff\xfe", "params/ci/x.yaml: cannot be read (UnicodeDecodeError"),
    ("params", None, "params/ci/x.yaml: cannot be read (IsADirectoryError"),
    ("params", b"rows: [\n", "params/ci/x.yaml: not valid YAML"),
    ("source", b"\xff", "notebooks/x.md: cannot be read (UnicodeDecodeError"),
    ("gpu", b"\xff", "results/gpu/a.json: not UTF-8 text"),
])
def test_unreadable_input_files_are_refused_in_one_line(tmp_path, monkeypatch, capsys, what, bad, fragment):
    """A parameter file in invalid UTF-8 or a folder, a notebook source in invalid UTF-8 and a GPU record in
    invalid UTF-8 gave tracebacks (UnicodeDecodeError, IsADirectoryError) and exit 1; YAML errors were
    several lines."""
    _layout(tmp_path, "rows: 7\n")
    path = {"params": tmp_path / "params" / "ci" / "x.yaml", "source": tmp_path / "notebooks" / "x.md",
            "gpu": tmp_path / "results" / "gpu" / "a.json"}[what]
    path.parent.mkdir(parents=True, exist_ok=True)
    if bad is None:
        path.unlink()
        path.mkdir()
    else:
        path.write_bytes(bad)
    monkeypatch.chdir(tmp_path)
    argv = ["check-gpu"] if what == "gpu" else ["notebook", "x", "--profile", "ci"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err


def test_set_overrides_one_parameter_and_builds_beside_the_profile(tmp_path, monkeypatch, capsys):
    """``--set rows=9`` runs with 9 (not the file's 7), writes under ``ci-custom`` and leaves the
    profile's own outputs alone; a misspelt or mistyped override exits 2 naming the key (refused before any
    kernel starts, so checked through the driver's ``main`` in this process, as the other refusals are)."""
    layout = _layout(tmp_path, "rows: 7\n")
    command = [sys.executable, "-m", "critscale.bookbuild", "notebook", "x", "--profile", "ci"]
    run = subprocess.run(command + ["--set", "rows=9"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    custom = Layout("ci", root=tmp_path, build_as="ci-custom")
    assert json.loads((custom.results / "x.json").read_text())["values"]["rows_seen"] == 9
    box = [c for c in nbformat.read(custom.executed / "x.ipynb", 4).cells if "parameters" in c.metadata.get("tags", [])]
    assert "with rows=9" in box[0].source and "rows = 9" in box[0].source
    assert not any(p.exists() for p in outputs(layout, "x"))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    for bad, key in (("rowz=9", "unknown parameter 'rowz'"), ("rows=nine", "parameter 'rows' is"),
                     ("rows", "expected NAME=VALUE")):
        try:
            status = main(command[3:] + ["--set", bad])
        except SystemExit as stop:
            status = stop.code
        err = capsys.readouterr().err
        assert status == 2 and key in err, (bad, err)


# ---------------------------------------------------------------- the parameter box and folding
def _executed_like():
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"parameters": {"profile": "ci", "rows": 8}}
    nb.cells = [
        nbformat.v4.new_code_cell('profile = "cpu"  # set by make\nrows = 64  # rows\nseed = [1,\n  2]'),
        nbformat.v4.new_code_cell('# Parameters\nprofile = "ci"\nrows = 8\n'),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("y = 2"),
        nbformat.v4.new_code_cell("z = 3"),
    ]
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.cells[1].metadata["tags"] = ["injected-parameters"]
    nb.cells[3].metadata["tags"] = ["remove-input"]
    nb.cells[4].metadata["tags"] = ["show-input"]
    return nb


def test_one_folded_parameter_box_with_this_builds_values():
    """papermill leaves two parameter cells; the page must show one, with the injected values."""
    nb = _executed_like()
    pages.merge_parameters(nb, "params/ci/x.yaml")
    params_cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params_cells) == 1 and not any("injected-parameters" in c.metadata.get("tags", [])
                                              for c in nb.cells)
    cell = params_cells[0]
    namespace: dict = {}
    exec(cell.source, namespace)
    assert (namespace["profile"], namespace["rows"], namespace["seed"]) == ("ci", 8, [1, 2])
    assert "# rows" in cell.source and "hide-input" in cell.metadata["tags"]


def test_code_is_folded_except_where_shown_on_purpose():
    nb = _executed_like()
    pages.merge_parameters(nb, "params/ci/x.yaml")
    assert pages.fold_code(nb) == 1
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    assert "hide-input" in tags[1] and tags[2] == ["remove-input"] and tags[3] == ["show-input"]
    shown = _executed_like()
    shown.metadata["critscale"] = {"fold_code": False}
    assert pages.fold_code(shown) == 0


# ---------------------------------------------------------------- GPU records (issue 14.10)
@pytest.fixture
def gpu_record():
    return json.loads((ROOT / "results" / "gpu" / "kernels_run.json").read_text())


def test_committed_gpu_results_pass_the_schema():
    names = gpu_results.validate_all(ROOT / "results" / "gpu")
    assert names, "no recorded GPU result found"


@pytest.mark.parametrize("field, value", [
    ("device", "my laptop"), ("date_utc", "yesterday"), ("date_utc", "2999-01-01T00:00:00Z"),
    ("commit", "none"), ("commit", "0123456789ab"), ("versions", {}), ("wall_time_s", -1)])
def test_invalid_gpu_record_is_refused_naming_the_field(gpu_record, field, value):
    """Before the schema, {'device': 'my laptop', 'date_utc': 'yesterday', 'commit': 'none'} rendered."""
    bad = copy.deepcopy(gpu_record)
    bad["provenance"][field] = value
    with pytest.raises(gpu_results.GpuResultError, match=f"field '{field}'"):
        gpu_results.validate(bad, "results/gpu/x.json")


def test_invalid_gpu_record_fails_the_build_with_one_line(tmp_path, gpu_record):
    bad = copy.deepcopy(gpu_record)
    del bad["provenance"]["versions"]
    (tmp_path / "results" / "gpu").mkdir(parents=True)
    (tmp_path / "results" / "gpu" / "bad.json").write_text(json.dumps(bad))
    run = subprocess.run([sys.executable, "-m", "critscale.bookbuild", "check-gpu"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == ["error: results/gpu/bad.json: provenance field 'versions' is missing"]


# ---------------------------------------------------------------- publication tables
@pytest.mark.parametrize("value, text", [
    (4.9576, "4.958"), (0.012346, "0.01235"), (1234.56, "1235"), (12345.6, r"\(1.235 \times 10^{4}\)"),
    (2.5e-7, r"\(2.5 \times 10^{-7}\)"), (3, "3"), (np.int64(40), "40"), (float("inf"), r"\(\infty\)"),
    (float("nan"), "n/a"), (True, "yes"), (0.0, "0"), (-0.5, "-0.5")])
def test_numbers_print_with_significant_digits_never_exponent_notation(value, text):
    """pandas printed 4.957600e+00 in the ladder table."""
    assert tables.format_number(value) == text


def test_table_markdown_has_math_headers_no_index_and_escapes_text():
    df = pd.DataFrame({r"law \(\sqrt{2\log n}\)": ["a|b", "x_1"], "value": [4.9576, 1e-9]}, index=[5, 6])
    md = tables.to_markdown(df)
    header, align, *rows = md.strip().split("\n")
    assert header == r"| law $\sqrt{2\log n}$ | value |"
    assert align == "| :--- | ---: |"
    assert rows == [r"| a\|b | 4.958 |", r"| x\_1 | $1 \times 10^{-9}$ |"]
    assert "5" not in md.split("\n", 2)[2].split("|")[1], "the index must not be printed"


# ---------------------------------------------------------------- summaries
def test_summary_box_convention_catches_each_broken_field():
    good = ("# T\n\n:::{admonition} In short\n:class: chapter-summary\n\nClaim\n: It holds.\n\n"
            "Status\n: proved\n\nKey number\n: {glue:text}`k:.2f`\n\nFigure\n: {numref}`fig-x`\n:::\n\n"
            "## Section\n\n```{glue:figure} f\n:name: fig-x\n\nCaption.\n```\n")
    assert summaries.problems(good, "t") == []
    broken = {"Status\n: proved": "Status\n: certain", "It holds.": "It holds. And more.",
              "{glue:text}`k:.2f`": "3.14", "{numref}`fig-x`": "{numref}`fig-y`"}
    for old, new in broken.items():
        assert summaries.problems(good.replace(old, new), "t"), f"{new!r} was accepted"
    assert summaries.cross_page("{glue:text}`k:.2f`", "t") == "{glue:text}`generated/t.ipynb::k:.2f`"
    assert summaries.cross_page("{glue:text}`k`", "t") == "{glue:text}`generated/t.ipynb::k:`"


def test_landing_page_pastes_the_markdown_a_box_glues(tmp_path):
    """myst-nb does not paste {glue:md} across pages (the landing page warned 'No key ... found' and the
    strict build failed): the value is read from the executed notebook and pasted in place."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    record = {"application/papermill.record/text/markdown": "6 of the $6$ cells pass",
              "application/papermill.record/text/plain": "'6 of the 6 cells pass'"}
    nb.cells = [nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output(
        "display_data", data=record, metadata={"scrapbook": {"name": "verdict", "mime_prefix": ""}})])]
    nbformat.write(nb, tmp_path / "t.ipynb")
    records = summaries.MarkdownRecords(tmp_path)
    assert summaries.cross_page("in the test, {glue:md}`verdict:myst`.", "t", records) == \
        "in the test, 6 of the $6$ cells pass."
    with pytest.raises(summaries.SummaryError, match="pastes other, which the notebook glued no markdown for"):
        summaries.cross_page("{glue:md}`other:myst`", "t", records)
    with pytest.raises(summaries.SummaryError, match="no executed notebook"):
        summaries.cross_page("{glue:md}`verdict:myst`", "u", records)


# ---------------------------------------------------------------- rerun and cite
def test_wheel_installs_and_imports_and_the_archive_holds_the_notebooks(tmp_path):
    """The book links these two files; a reader installs the wheel with pip and runs a notebook."""
    from critscale.page.provenance import git_commit

    archive = downloads.source_archive(ROOT, git_commit(), tmp_path / "downloads")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert any(n.endswith("/notebooks/05_ladder.md") for n in names)
    assert any(n.endswith("/src/critscale/page/pagedata.py") for n in names)
    wheel = downloads.wheel(archive, tmp_path / "downloads")
    assert wheel.name == downloads.wheel_name(ROOT)
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    str(wheel)], check=True)
    probe = subprocess.run([sys.executable, "-c", "import critscale, critscale.kernels, critscale.bookbuild;"
                            "print(critscale.__file__, critscale.__version__)"],
                           cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin",
                                              "TRITON_INTERPRET": "1"},
                           capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    location, version = probe.stdout.split()
    assert location.startswith(str(target)), "critscale was not imported from the wheel"
    assert version == downloads.version(ROOT)


@pytest.mark.book
def test_a_downloaded_notebook_runs_with_only_the_books_wheel(tmp_path):
    """The landing page promises that a page's notebook runs after installing the linked wheel:
    run the executed 01_definitions.ipynb outside the repository, critscale from the wheel."""
    import papermill

    html = ROOT / "build" / "site" / "ci" / "_build" / "html"
    wheels = sorted((html / "downloads").glob("critscale-*.whl"))
    executed = ROOT / "build" / "executed" / "ci" / "01_definitions.ipynb"
    if not wheels or not executed.exists():
        pytest.skip("the ci book is not built: run `make test`")
    target = tmp_path / "site-packages"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    str(wheels[0])], check=True)
    work = tmp_path / "reader"
    work.mkdir()
    env_keys = ("PYTHONPATH", "CRITSCALE_ROOT", "CRITSCALE_RESULTS_DIR", "CRITSCALE_NOTEBOOK")
    saved = {k: os.environ.get(k) for k in env_keys}
    os.environ["PYTHONPATH"] = str(target)
    for key in env_keys[1:]:
        os.environ.pop(key, None)
    try:
        nb = papermill.execute_notebook(str(executed), str(work / "out.ipynb"), cwd=str(work),
                                        kernel_name="python3", progress_bar=False,
                                        parameters={"n": 256, "rows": 4, "n_figure": 256})
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert (work / "build" / "results" / "interactive" / "interactive.json").exists()


def test_recorded_strings_carry_markdown_for_glue_md(tmp_path, monkeypatch):
    """A sentence built from the data and glued with {glue:md} needs a text/markdown form; without it
    the strict build fails ('No text/markdown found'), as it did for chapters 06-09."""
    from critscale.page import pagedata

    monkeypatch.setenv("CRITSCALE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("CRITSCALE_NOTEBOOK", "x")
    glued = {}
    monkeypatch.setattr(pagedata, "glue", lambda key, value, display=False, bundle=None: glued.update({key: bundle}))
    pagedata.record("sentence", "all $12$ cells")
    pagedata.record("count", 12)
    assert glued["sentence"]["text/markdown"] == "all $12$ cells"
    assert glued["count"] is None  # numbers keep IPython's own formatting
