"""Where and how a page was computed: profile, commit, date, device, package versions.

Every generated page starts with ``show_page_provenance(profile)``; the reproducibility
page collects the same facts for all notebooks from their results files.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as _md
import os
import platform
import subprocess
from pathlib import Path

PACKAGES = ("critscale", "numpy", "scipy", "torch", "triton", "transformers", "matplotlib", "seaborn")


def repo_root() -> Path:
    """The repository root (``$CRITSCALE_ROOT`` or the folder that holds src/critscale/)."""
    return Path(os.environ.get("CRITSCALE_ROOT", Path(__file__).resolve().parents[3]))


def git_commit() -> str:
    """``<sha>`` of HEAD, with ``+dirty`` when tracked files differ; ``unknown`` outside git.

    ``$CRITSCALE_COMMIT`` overrides it, for copies of the tree without ``.git`` (a GPU machine).
    """
    if os.environ.get("CRITSCALE_COMMIT"):
        return os.environ["CRITSCALE_COMMIT"]
    root = repo_root()
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "")


def package_versions(names=PACKAGES) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = _md.version(name)
        except _md.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def device_description() -> str:
    """The accelerator if torch sees one, else the CPU and its core count."""
    try:
        import torch

        if torch.cuda.is_available():
            return f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"
    except ImportError:
        pass
    cpu = platform.processor() or platform.machine()
    return f"CPU only: {cpu}, {os.cpu_count()} logical cores"


def collect(profile: str) -> dict:
    """All provenance facts as a plain dict."""
    return {
        "profile": profile,
        "commit": git_commit(),
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "device": device_description(),
        "python": platform.python_version(),
        "triton_interpret": os.environ.get("TRITON_INTERPRET", "unset"),
        "packages": package_versions(),
    }


def show_page_provenance(profile: str) -> dict:
    """Display the note at the top of a page saying where and how it was computed.

    The same facts are stored in the page's results file (section ``meta``).
    """
    from IPython.display import Markdown, display

    from .pagedata import _store

    facts = collect(profile)
    _store("provenance", facts, section="meta")
    versions = ", ".join(f"{k} {v}" for k, v in facts["packages"].items() if v != "not installed")
    display(Markdown(
        f"> **Computed by this page** in the `{facts['profile']}` profile, "
        f"commit `{facts['commit']}`, {facts['date_utc']}, on {facts['device']}.  \n"
        f"> Python {facts['python']}; {versions}."
    ))
    return facts
