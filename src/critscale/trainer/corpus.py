"""A text corpus that every Python installation carries, built deterministically.

Pretrained GPT-2 weights cannot be downloaded on an offline machine, so the book trains
its own GPT-2-architecture model (theory.md §6 P-13, "constraint for this project").
The text comes from the interpreter itself:

* ``"topics"``: the reference-manual topics of the CPython documentation
  (``pydoc_data.topics.topics``, about 0.5 MB of English prose and code), one document
  per topic, in sorted order of the topic names;
* ``"topics+docstrings"``: the same plus every module, class and function docstring of
  the standard library's ``.py`` files (read with ``ast``, never imported; test
  folders skipped), in sorted order of the file paths (about 2.3 MB with CPython 3.11);
* ``"topics+code"``: the topics plus the full text of those standard-library files
  (code, comments and docstrings; about 12 MB with CPython 3.11), enough text for a GPT-2-small-sized
  model trained for minutes not to cycle through its data dozens of times.

Every 10th document (index 9, 19, ...) is held out; the held-out text is what the
diagnostic reads, so the model is analysed on text it was not trained on.
The corpus is identified by the SHA-256 of its bytes, which enters the training cache key.
The text depends on the Python version that builds it; the hash records which one.
"""

from __future__ import annotations

import ast
import hashlib
import sysconfig
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SOURCES = ("topics", "topics+docstrings", "topics+code")
HELD_OUT_EVERY = 10
SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Corpus:
    """Training and held-out text as UTF-8 bytes, with the corpus's identity."""

    source: str
    train: bytes
    heldout: bytes
    n_documents: int
    sha256: str

    def describe(self) -> str:
        return (f"{self.source} corpus: {self.n_documents} documents, "
                f"{len(self.train) / 1e6:.2f} MB train / {len(self.heldout) / 1e6:.2f} MB held out, "
                f"sha256 {self.sha256[:12]}")


def _topic_documents() -> list[str]:
    from pydoc_data.topics import topics

    return [topics[name] for name in sorted(topics)]


def _stdlib_files() -> list[Path]:
    """The standard library's ``.py`` files in sorted order, without tests and site-packages."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    skipped = {"site-packages", "test", "tests", "idle_test", "__pycache__"}
    return [p for p in sorted(stdlib.rglob("*.py")) if not skipped.intersection(p.relative_to(stdlib).parts)]


def _code_documents() -> list[str]:
    """Full text of the standard library's files, one document per file (undecodable files skipped)."""
    documents = []
    for path in _stdlib_files():
        try:
            documents.append(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
    return documents


def _docstring_documents() -> list[str]:
    """Docstrings of the standard library, one document per file, without importing anything."""
    documents = []
    for path in _stdlib_files():
        try:
            with warnings.catch_warnings():  # invalid escape sequences in old stdlib files
                warnings.simplefilter("ignore")
                tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
            continue  # a few stdlib files are templates or deliberately invalid
        nodes = [tree] + [n for n in ast.walk(tree)
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        parts = [doc for doc in (ast.get_docstring(n) for n in nodes) if doc]
        if parts:
            documents.append("\n\n".join(parts))
    return documents


def build_corpus(source: str = "topics") -> Corpus:
    """The deterministic corpus named by ``source`` (one of :data:`SOURCES`)."""
    if source not in SOURCES:
        raise ValueError(f"unknown corpus source {source!r}; choose one of {SOURCES}")
    documents = _topic_documents()
    if source == "topics+docstrings":
        documents += _docstring_documents()
    elif source == "topics+code":
        documents += _code_documents()
    train = [d for i, d in enumerate(documents) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1]
    heldout = [d for i, d in enumerate(documents) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1]
    train_bytes = SEPARATOR.join(train).encode("utf-8")
    heldout_bytes = SEPARATOR.join(heldout).encode("utf-8")
    digest = hashlib.sha256(train_bytes + b"\0" + heldout_bytes).hexdigest()
    return Corpus(source, train_bytes, heldout_bytes, len(documents), digest)


def byte_tokens(data: bytes) -> np.ndarray:
    """The byte-level tokens (vocabulary 256) of ``data``, shape ``(len(data),)``."""
    return np.frombuffer(data, dtype=np.uint8).astype(np.int64)
