"""Command line of the build driver (see ``critscale.bookbuild``); the Makefile is its caller.

Exit status: 0 on success, 1 when a notebook or jupyter-book fails (with the traceback
or the warnings), 2 on bad input (the command line, the profile, a parameter file, a
notebook source, a recorded GPU result), with one line naming the input and the problem;
130 when interrupted (one line; the previous outputs are kept).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import traceback
from pathlib import Path

from ..page.gpu_results import GpuResultError, commit_in_history, validate_all
from . import downloads, site
from .notebook import Layout, SourceError, execute, notebook_names
from .params import ParameterError

PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (no usage block), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def profile_problem(root: Path, profile: str) -> str | None:
    """Why ``profile`` is not one of the profiles (the folders of ``params/``), or None."""
    known = ", ".join(sorted(p.name for p in (root / "params").glob("*") if p.is_dir())) or "none"
    if not PROFILE_NAME.fullmatch(profile):
        return (f"--profile {profile!r} (or $PROFILE): not a profile name (letters, digits, '-', '_'; "
                f"the profiles: {known})")
    if not (root / "params" / profile).is_dir():
        return f"--profile {profile!r} (or $PROFILE): no folder params/{profile}/ (the profiles: {known})"
    return None


def _session_log(layout: Layout) -> Path | None:
    session = os.environ.get("CRITSCALE_BUILD_SESSION")
    return layout.logs / f"session-{session}.tsv" if session else None


def parse_overrides(pairs: list[str]) -> dict:
    """``["n=65536", "families=[gauss, unif]"]`` -> ``{"n": 65536, "families": ["gauss", "unif"]}`` (YAML values)."""
    import yaml

    values = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ParameterError(f"--set {pair!r}: expected NAME=VALUE")
        try:
            values[key.strip()] = yaml.safe_load(text)
        except yaml.YAMLError as err:
            reason = " ".join(str(err).split())  # YAML's message spans lines
            raise ParameterError(f"--set {pair!r}: the value is not valid YAML ({reason})") from None
    return values


def run_notebook(layout: Layout, name: str, overrides: dict | None = None) -> int:
    names = notebook_names(layout.root)
    if name not in names:
        print(f"error: no notebook notebooks/{name}.md", file=sys.stderr)
        return 2
    label = f"[{names.index(name) + 1:2d}/{len(names)}] {name:<28} {layout.profile}"
    try:  # the line is printed whole when the run ends, so that parallel runs do not interleave
        seconds = execute(layout, name, overrides)
    except (ParameterError, SourceError) as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:  # the previous outputs are as they were, the run's folders removed
        print(f"{label}  interrupted", file=sys.stderr, flush=True)
        return 130
    except Exception as err:  # a failing cell: papermill's error carries the cell's traceback
        text = str(err) if type(err).__name__ == "PapermillExecutionError" else traceback.format_exc()
        print(f"{label}  FAILED\n{text}", file=sys.stderr, flush=True)
        return 1
    print(f"{label}  {seconds:6.1f} s", flush=True)
    if overrides:
        print(f"executed notebook: {(layout.executed / name).relative_to(layout.root)}.ipynb; "
              f"results: {layout.results.relative_to(layout.root)}/")
    log = _session_log(layout)
    if log:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as out:
            out.write(f"{name}\t{seconds:.1f}\n")
    return 0


def summary(layout: Layout, output: Path, started: float) -> str:
    """The last lines of a build: notebooks run, their time, where the book is."""
    log = _session_log(layout)
    runs = []
    if log and log.exists():
        runs = [line.split("\t") for line in log.read_text().splitlines() if line]
        log.unlink()
    executed = sum(float(seconds) for _, seconds in runs)
    total = len(notebook_names(layout.root))
    return (f"{len(runs)} of {total} notebooks executed ({executed:.0f} s; the others were up to date), "
            f"rendering {time.perf_counter() - started:.0f} s\n"
            f"book ({layout.profile} profile): {output.relative_to(layout.root)}")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m critscale.bookbuild", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    nb = sub.add_parser("notebook", help="execute one notebook")
    nb.add_argument("name")
    nb.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override one parameter of the profile's file (a YAML value); the outputs then go to "
                         "build/*/<profile>-custom/, not into the profile's book")
    sub.add_parser("check-gpu", help="validate every results/gpu/*.json")
    sub.add_parser("html", help="stage and render the HTML book")
    sub.add_parser("pdf", help="stage and render the PDF book")
    sub.add_parser("version", help="print the companion's version")
    for p in sub.choices.values():
        p.add_argument("--profile", default=os.environ.get("PROFILE", "cpu"))
    args = parser.parse_args(argv)
    layout = Layout(args.profile)
    problem = profile_problem(layout.root, args.profile) if args.command in ("notebook", "html", "pdf") else None
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.command == "notebook":
        try:
            overrides = parse_overrides(args.set)
        except ParameterError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        if overrides:
            layout = Layout(args.profile, build_as=f"{args.profile}-custom")
        return run_notebook(layout, args.name, overrides)
    if args.command == "version":
        print(downloads.version(layout.root))
        return 0
    if args.command == "check-gpu":
        try:
            validate_all(layout.root / "results" / "gpu")
        except GpuResultError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        if commit_in_history("HEAD") is None:
            print("note: no full git history here (a source archive or a shallow clone): the commits of "
                  "results/gpu/ were checked for their form only", file=sys.stderr)
        return 0
    started = time.perf_counter()
    try:
        output = site.render(layout, args.command)
    except (site.SiteError, downloads.DownloadError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(summary(layout, output, started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
