"""Execute one notebook of the book, leaving either all of its outputs or none.

The run writes into its own staging folder ``build/staging/<profile>/<notebook>.<token>/`` (the
executed ``.ipynb``, the results JSON and the figures; :mod:`.staging`).  Only when every cell ran do
the staged outputs replace the notebook's previous outputs in ``build/executed/<profile>`` and
``build/results/<profile>``, each with one rename, the executed notebook last (make's target): until
then the previous outputs stay whole, so a run killed at any point leaves them as they were.  A failing
cell prints its traceback and removes the previous outputs too (they are not this source's).  The
staging and kernel-socket folders of a killed run are removed by the next run.

The kernel talks to papermill over IPC sockets in a private temporary folder (no unencrypted TCP port),
and papermill receives the notebook as an object, not as a nameless stream.  The kernel is stopped by a
shutdown request only, never by a signal (:func:`stop_kernel`).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import pages, params, staging


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

    @property
    def staging(self) -> Path:
        """The folder of the runs' staging folders (one per run: :mod:`.staging`)."""
        return self.root / "build" / "staging" / self.folder

    def source(self, name: str) -> Path:
        return self.root / "notebooks" / f"{name}.md"

    def params_file(self, name: str) -> Path:
        return self.root / "params" / self.profile / f"{name}.yaml"


def notebook_names(root: Path | None = None) -> list[str]:
    return sorted(p.stem for p in ((root or Path.cwd()) / "notebooks").glob("*.md"))


class SourceError(ValueError):
    """A notebook source that cannot be read as a notebook."""


def read_source(path: Path, where: str | None = None):
    """The notebook of a MyST source (``SourceError`` naming it as ``where`` if it cannot be read as one)."""
    import jupytext

    where = where or str(path)
    try:
        return jupytext.read(path)
    except (OSError, UnicodeDecodeError) as err:
        raise SourceError(f"{where}: cannot be read ({err.__class__.__name__}: {err})") from None
    except Exception as err:  # jupytext's parse errors have no common class
        raise SourceError(f"{where}: not a notebook source ({err.__class__.__name__}: {err})") from None


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
    values = params.load_file(path, where)
    params.check(values, known, where)
    params.check(overrides or {}, known, "--set")
    params.check({"profile": layout.profile}, known, f"{where} (profile)")
    return {**values, **(overrides or {}), "profile": layout.profile}


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def outputs(layout: Layout, name: str) -> list[Path]:
    """Every file or folder a run of ``name`` leaves in the build."""
    return [layout.executed / f"{name}.ipynb", layout.results / f"{name}.json",
            layout.results / "figures" / name]


def _kernel_manager(folder: Path):
    from jupyter_client.manager import KernelManager

    # a loaded machine may take seconds to let the kernel exit: up to 15 s before SIGTERM (stop_kernel)
    return KernelManager(kernel_name="python3", transport="ipc", ip=str(folder / "kernel"),
                         shutdown_wait_time=30.0)


def stop_kernel(km, now: bool = False) -> None:
    """Stop the kernel with a shutdown request on its control channel, or kill it ``now`` (a run abandoned
    while a cell may be running); remove its connection files.  A kernel that has not exited after half of
    ``km.shutdown_wait_time`` gets SIGTERM, after the other half SIGKILL.

    Not ``km.shutdown_kernel``: that first interrupts the kernel with SIGINT.  papermill's last request
    (``kernel_info``) returns as soon as the kernel has sent its reply, while the kernel is still inside the
    request's handler, where SIGINT raises KeyboardInterrupt; on a loaded machine the signal lands there
    and the kernel logs ``[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel.`` after a successful
    run.  No signal is sent here unless the kernel fails to exit.
    """
    if km.has_kernel:
        if now:
            km.signal_kernel(signal.SIGKILL)
        else:
            km.request_shutdown()
        km.finish_shutdown()  # waits for the process (and reaps it)
    km.cleanup_resources()


def execute(layout: Layout, name: str, overrides: dict | None = None) -> float:
    """Run notebook ``name`` (with ``overrides`` of its parameter file); its wall time in seconds.

    Raises on any failure; a failing notebook leaves none of its outputs, an interrupted run leaves the
    previous ones as they were.
    """
    import papermill

    staging.clean(layout.staging)
    nb = read_source(layout.source(name), f"notebooks/{name}.md")
    values = checked_parameters(layout, name, nb, overrides)
    run = staging.start(layout.staging, name)
    env = {"CRITSCALE_NOTEBOOK": name, "CRITSCALE_PROFILE": layout.profile,
           "CRITSCALE_RESULTS_DIR": str(run.stage)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    logging.getLogger("papermill").setLevel(logging.WARNING)
    start = time.perf_counter()
    try:
        km = _kernel_manager(run.sockets)
        try:  # nbclient leaves a kernel it did not create running
            executed = papermill.execute_notebook(
                nb, None, parameters=values, kernel_name="python3", cwd=str(layout.root),
                progress_bar=False, log_output=False, km=km)
        except Exception:  # a failing cell: the kernel is idle, as after a success
            stop_kernel(km)
            raise
        except BaseException:  # interrupted: the kernel may still be running a cell
            stop_kernel(km, now=True)
            raise
        stop_kernel(km)
        where = f"params/{layout.profile}/{name}.yaml"
        if overrides:
            where += " with " + ", ".join(f"{key}={value!r}" for key, value in overrides.items())
        pages.merge_parameters(executed, where)
        pages.fold_code(executed)
        import nbformat

        nbformat.write(executed, run.stage / f"{name}.ipynb")
        seconds = time.perf_counter() - start
        _commit(layout, name, run.stage)
    except Exception:
        for path in outputs(layout, name):
            _remove(path)
        raise
    finally:
        run.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return seconds


def _replace(staged: Path, target: Path, trash: Path) -> None:
    """Put ``staged`` at ``target`` with one rename (a previous folder is first moved into ``trash``, which
    the run's staging folder holds); remove ``target`` when nothing was staged."""
    if not staged.exists():
        _remove(target)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or (target.exists() and (staged.is_dir() or target.is_dir())):
        os.replace(target, trash)  # a file replaces a file in the one rename below; a folder cannot
    os.replace(staged, target)


def _commit(layout: Layout, name: str, stage: Path) -> None:
    """Move the staged outputs into place, the executed notebook last (make's target)."""
    trash = stage / ".previous"
    trash.mkdir()
    _replace(stage / f"{name}.json", layout.results / f"{name}.json", trash / "json")
    _replace(stage / "figures" / name, layout.results / "figures" / name, trash / "figures")
    _replace(stage / f"{name}.ipynb", layout.executed / f"{name}.ipynb", trash / "ipynb")
