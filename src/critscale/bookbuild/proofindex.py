"""Sphinx extension: the book's index of results lists each statement by its number and title.

sphinx-proof's own index ("Proof Index", page ``prf-prf``) lists every statement under its raw label,
``thm-06-gumbel (generated/06_gumbel_window)``.  This extension replaces that index by one grouped by
chapter, in book order, whose entries read as the statement reads on its page: ``Theorem 1`` with its
title, e.g. "Gumbel class with a nondecreasing hazard: ...".

The number is the one the page prints beside the statement (Sphinx's figure number of the enumerable
proof node); the title is the directive's argument.  Statements without a number
(``:nonumber:``) or without a title are listed by their kind alone.

Use: list ``critscale.bookbuild.proofindex`` after ``sphinx_proof`` in the book's extensions.

Test: ``tests/test_proof_index.py::test_proof_index_lists_numbers_and_titles`` (a two-page Sphinx project:
the index shows "Theorem 1" and the title, grouped under the page title, and no raw label as link text).
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from sphinx.domains import Index

ENV_KEY = "critscale_proof_titles"
GREEK = {name: chr(code) for name, code in (
    ("alpha", 0x3B1), ("beta", 0x3B2), ("gamma", 0x3B3), ("delta", 0x3B4), ("epsilon", 0x3B5), ("eta", 0x3B7),
    ("theta", 0x3B8), ("kappa", 0x3BA), ("lambda", 0x3BB), ("mu", 0x3BC), ("xi", 0x3BE), ("pi", 0x3C0),
    ("rho", 0x3C1), ("sigma", 0x3C3), ("tau", 0x3C4), ("phi", 0x3C6), ("psi", 0x3C8), ("Gamma", 0x393),
    ("Delta", 0x394), ("Lambda", 0x39B), ("Psi", 0x3A8))}


DROPPED = {"bar", "hat", "tilde", "mathrm", "mathbb", "mathcal", "operatorname", "left", "right", "big", "Bigl", "Bigr"}


def plain_title(title: str) -> str:
    """A title as index text: inline math ``$...$`` without dollars and braces, Greek letters as characters.

    ``plain_title("of the order of $\\kappa$")`` is ``"of the order of κ"``; accents and font commands
    (``\\bar``, ``\\mathrm``) are dropped, any other command keeps its name (``\\log`` gives ``log``).
    """
    def math(match: Any) -> str:
        body = re.sub(r"\\([A-Za-z]+)", lambda m: GREEK.get(m.group(1), "" if m.group(1) in DROPPED else m.group(1)),
                      match.group(1))
        return body.replace("{", "").replace("}", "").replace("\\", "")

    return re.sub(r"\$([^$]*)\$", math, title)


def _title_argument(text: str, title_format: str) -> str:
    """The directive's argument inside sphinx-proof's formatted title (``proof_title_format``, e.g. `` (%t)``)."""
    prefix, _, suffix = title_format.partition("%t")
    if text.startswith(prefix) and text.endswith(suffix) and len(text) >= len(prefix) + len(suffix):
        return text[len(prefix):len(text) - len(suffix)].strip()
    return text.strip()


def collect_titles(app: Any, doctree: nodes.document) -> None:
    """Record the title of every labelled proof-domain statement of the page just read."""
    env = app.env
    titles = env.__dict__.setdefault(ENV_KEY, {})
    title_format = app.config.proof_title_format
    for node in doctree.findall(nodes.Element):
        label, realtype = node.get("label"), node.get("realtype")
        if not label or not realtype or "countertype" not in node.attributes:
            continue
        titles[label] = (env.docname, plain_title(_title_argument(node.get("title", ""), title_format)))


def purge_titles(app: Any, env: Any, docname: str) -> None:
    titles = env.__dict__.get(ENV_KEY, {})
    for label in [label for label, (page, _) in titles.items() if page == docname]:
        del titles[label]


def merge_titles(app: Any, env: Any, docnames: Any, other: Any) -> None:
    env.__dict__.setdefault(ENV_KEY, {}).update(other.__dict__.get(ENV_KEY, {}))


class TitledProofIndex(Index):
    """The proof domain's index, one group per page in document order, entries "Kind N" with their titles."""

    name = "prf"
    localname = "Index of results"
    shortname = "Results"

    def generate(self, docnames=None) -> tuple[list, bool]:
        env = self.domain.env
        proofs = getattr(env, "proof_list", {})
        titles = env.__dict__.get(ENV_KEY, {})
        numbers = getattr(env, "toc_fignumbers", {})
        groups: dict[str, list] = {}
        for label, values in proofs.items():
            docname = values["docname"]
            if docnames and docname not in docnames:
                continue
            kind = values["realtype"].title()
            number = numbers.get(docname, {}).get(values["countertype"], {}).get(values["ids"][0], ())
            name = f"{kind} {'.'.join(map(str, number))}" if number and not values["nonumber"] else kind
            entry = (name, 0, docname, values["ids"][0], "", "", titles.get(label, ("", ""))[1])
            groups.setdefault(docname, []).append((tuple(number) or (10**9,), entry))
        content = []
        for docname in sorted(groups):
            heading = env.titles[docname].astext() if docname in env.titles else docname
            content.append((heading, [entry for _, entry in sorted(groups[docname], key=lambda item: item[0])]))
        return content, True


def install_index(app: Any) -> None:
    """Give this build's proof domain the titled index in place of sphinx-proof's (this application only)."""
    app.env.get_domain("prf").indices = [TitledProofIndex]


def setup(app: Any) -> dict[str, Any]:
    app.setup_extension("sphinx_proof")
    app.connect("builder-inited", install_index)
    app.connect("doctree-read", collect_titles)
    app.connect("env-purge-doc", purge_titles)
    app.connect("env-merge-info", merge_titles)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
