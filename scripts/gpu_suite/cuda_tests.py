"""The kernel tests with CUDA: ``pytest tests/test_kernels_*.py`` with ``TRITON_INTERPRET=0``.

The GPU-marked cases run; the interpreter cases skip with their reason.  Writes ``kernels_tests.json``
(counts, every case, the CUDA cases' tally) and ``kernels_tests.log``.  pytest runs in a child process
(the same import set-up, through ``gpu_results.py --pytest-child``) so that it imports triton fresh.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from .env import ROOT
from .output import write_json


def pytest_child(args: list[str]) -> int:
    """Entry point of the pytest child: the installed critscale checked, then pytest."""
    from .env import ensure_importable

    ensure_importable()
    import pytest

    return pytest.main(args)


def cases_from_junit(path: Path) -> list[dict]:
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    cases = []
    for case in suite.iter("testcase"):
        status, detail = "passed", ""
        for tag, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            el = case.find(tag)
            if el is not None:
                status, detail = name, (el.get("message") or "")[:300]
        cases.append({"test": f"{case.get('classname')}::{case.get('name')}", "status": status,
                      "time_s": float(case.get("time", 0)), "detail": detail})
    return cases


def is_cuda_case(test: str) -> bool:
    """A case parametrised with the ``cuda`` backend id (``test_x[cuda]``, ``test_x[9-cuda-3]``)."""
    return "[" in test and "cuda" in test.rsplit("[", 1)[1].rstrip("]").split("-")


TESTS_MIN_S = 120  # the tests' time limit is what is left of the budget, but never less than this

SMOKE_SKIP = "skipped: the smoke run has no CUDA device (the interpreter cases of these tests run in make test)"


def run_tests(run) -> str:
    """Run the kernel tests with CUDA and record them; returns the part's status."""
    if run.smoke:
        return SMOKE_SKIP
    started = time.time()
    env = dict(os.environ, TRITON_INTERPRET="0", HF_HUB_OFFLINE="1", MPLBACKEND="Agg")
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_kernels_*.py"))
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        args = ["-q", "-ra", "-p", "no:cacheprovider", f"--junitxml={junit}", *files]
        if run.quick:
            args += ["-m", "gpu"]
        cmd = [sys.executable, str(ROOT / "scripts" / "gpu_results.py"), "--pytest-child", *args]
        limit = max(TESTS_MIN_S, run.budget_s - run.elapsed())  # a hung test must not take the whole session
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            proc = subprocess.CompletedProcess(cmd, returncode=-1, stdout=out + f"\n[timed out after {limit:.0f} s]",
                                               stderr="")
        log = proc.stdout + "\n--- stderr ---\n" + proc.stderr
        (Path(run.out) / "kernels_tests.log").write_text(log)
        summary = {"returncode": proc.returncode, "command": " ".join(["pytest", *args[:4], *files]), "files": files}
        try:
            cases = cases_from_junit(junit)
        except (OSError, ET.ParseError, AttributeError) as exc:  # keep the log: it says what went wrong
            summary["junit_error"] = repr(exc)
            cases = []
    counts = {}
    for c in cases:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    gpu = [c for c in cases if is_cuda_case(c["test"])]
    summary.update(counts=counts, cases=cases, tail=log[-3000:],
                   gpu_cases={"total": len(gpu), "passed": sum(c["status"] == "passed" for c in gpu)})
    write_json(run, "kernels_tests", summary, started)
    return "done" if proc.returncode == 0 else f"failed: pytest exited {proc.returncode}"
