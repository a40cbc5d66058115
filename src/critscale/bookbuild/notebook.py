"""Execute one notebook of the book, leaving either all of its outputs or none.

The run writes into a staging folder ``build/staging/<profile>/<notebook>/`` (the
executed ``.ipynb``, the results JSON and the figures); they replace the notebook's
previous outputs in ``build/executed/<profile>`` and ``build/results/<profile>`` only
when every cell ran.  A failing cell prints its traceback and leaves nothing behind: the
previous outputs were removed before the run, the staging folder is removed after it.

The kernel talks to papermill over IPC sockets in a private temporary folder (no
unencrypted TCP port), and papermill receives the notebook as an object, not as a
nameless stream.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import pages, params



@dataclass(frozen=True)
class Layout:
    """Where one profile's build products live (relative to the repository root)."""

    profile: str
    root: Path = field(default_factory=Path.cwd)
    build_as: str | None = None  # the build folders' name when not the profile's (a run with overrides)

    @property
    def folder(self) -> str:
        return self.build_as or self.profile

    @property
    def executed(self) -> Path:
        return self.root / "build" / "executed" / self.folder

    @property
    def results(self) -> Path:
        return self.root / "build" / "results" / self.folder

    @property
    def logs(self) -> Path:
        return self.root / "build" / "logs" / self.folder

    def staging(self, name: str) -> Path:
        return self.root / "build" / "staging" / self.folder / name

    def source(self, name: str) -> Path:
        return self.root / "notebooks" / f"{name}.md"

    def params_file(self, name: str) -> Path:
        return self.root / "params" / self.profile / f"{name}.yaml"


def notebook_names(root: Path | None = None) -> list[str]:
    return sorted(p.stem for p in ((root or Path.cwd()) / "notebooks").glob("*.md"))


def read_source(path: Path):
    import jupytext

    return jupytext.read(path)


def checked_parameters(layout: Layout, name: str, nb, overrides: dict | None = None) -> dict:
    """The parameter file's values, then ``overrides``, plus ``profile``, checked against the parameters cell."""
    path = layout.params_file(name)
    if not path.exists():
        raise params.ParameterError(f"{path.relative_to(layout.root)}: missing")
    where = str(path.relative_to(layout.root))
    try:
        known = params.defaults(params.parameters_cell(nb).source)
    except params.ParameterError as err:
        raise params.ParameterError(f"notebooks/{name}.md: {err}") from None
    values = params.load_file(path)
    params.check(values, known, where)
    params.check(overrides or {}, known, "--set")
    params.check({"profile": layout.profile}, known, f"{where} (profile)")
    return {**values, **(overrides or {}), "profile": layout.profile}


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def outputs(layout: Layout, name: str) -> list[Path]:
    """Every file or folder a run of ``name`` leaves in the build."""
    return [layout.executed / f"{name}.ipynb", layout.results / f"{name}.json",
            layout.results / "figures" / name]


def _kernel_manager(folder: Path):
    from jupyter_client.manager import KernelManager

    return KernelManager(kernel_name="python3", transport="ipc", ip=str(folder / "kernel"))


def execute(layout: Layout, name: str, overrides: dict | None = None) -> float:
    """Run notebook ``name`` (with ``overrides`` of its parameter file); its wall time in seconds.

    Raises on any failure, leaving nothing.
    """
    import papermill

    nb = read_source(layout.source(name))
    values = checked_parameters(layout, name, nb, overrides)
    for path in outputs(layout, name):
        _remove(path)
    stage = layout.staging(name)
    _remove(stage)
    stage.mkdir(parents=True)
    env = {"CRITSCALE_NOTEBOOK": name, "CRITSCALE_PROFILE": layout.profile,
           "CRITSCALE_RESULTS_DIR": str(stage)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    logging.getLogger("papermill").setLevel(logging.WARNING)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="critscale-kernel-") as sockets:
            km = _kernel_manager(Path(sockets))
            try:
                executed = papermill.execute_notebook(
                    nb, None, parameters=values, kernel_name="python3", cwd=str(layout.root),
                    progress_bar=False, log_output=False, km=km)
            finally:  # nbclient leaves a kernel it did not create running
                if km.has_kernel:
                    km.shutdown_kernel(now=False)
        where = f"params/{layout.profile}/{name}.yaml"
        if overrides:
            where += " with " + ", ".join(f"{key}={value!r}" for key, value in overrides.items())
        pages.merge_parameters(executed, where)
        pages.fold_code(executed)
        import nbformat

        nbformat.write(executed, stage / f"{name}.ipynb")
    except BaseException:
        _remove(stage)
        raise
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    seconds = time.perf_counter() - start
    _commit(layout, name, stage)
    return seconds


def _commit(layout: Layout, name: str, stage: Path) -> None:
    """Move the staged outputs into place (the executed notebook last: make's target)."""
    layout.results.mkdir(parents=True, exist_ok=True)
    layout.executed.mkdir(parents=True, exist_ok=True)
    if (stage / f"{name}.json").exists():
        os.replace(stage / f"{name}.json", layout.results / f"{name}.json")
    if (stage / "figures" / name).exists():
        (layout.results / "figures").mkdir(exist_ok=True)
        os.replace(stage / "figures" / name, layout.results / "figures" / name)
    os.replace(stage / f"{name}.ipynb", layout.executed / f"{name}.ipynb")
    shutil.rmtree(stage)
