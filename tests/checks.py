"""Small checks shared by several test files (imported as ``checks``: pytest puts tests/ on the path)."""

from __future__ import annotations


def one_line_error(capsys, *fragments) -> str:
    """The one stderr line a refused input prints; fails when there are more lines, a traceback or a fragment missing."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    for fragment in fragments:
        assert fragment in err[0], err[0]
    return err[0]


def peak_bytes(call) -> int:
    """Peak memory that numpy allocates during ``call()`` (tracemalloc sees numpy's buffers)."""
    import tracemalloc

    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
