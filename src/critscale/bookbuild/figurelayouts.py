"""Sphinx extension: a glued figure in its wide layout where it fits, in its phone layout where it does not.

``pagedata.record_figure`` glues a figure laid out for the text column and puts its phone layout (the
panels in one column, ``narrowfigure``) in the glued output's metadata under ``pagedata.NARROW_METADATA``.
This extension's ``{glue:figure}`` places both images in the figure, the wide one with the class
``critscale-wide`` and the narrow one with ``critscale-narrow``, and marks the figure
``critscale-two-layouts``; the book's stylesheet (``book/_static/critscale.css``) shows the narrow one
when the figure is narrower than the wide layout (``plotting.HTML_FIGURE_WIDTH_IN``, 660 CSS px), so a
figure's text is never shown smaller than it was set.  Builders other than HTML (the PDF) keep the
wide image alone.  A figure glued without a phone layout is placed as myst-nb places it.

A figure of a page's own (``{figure} _generated/headline.*``, the landing page's) gets its phone layout
the same way when a file ``<name>-narrow.svg`` (or ``.png``) lies beside its image (``site.py`` copies
``<key>.narrow.svg`` there).

Use: list ``critscale.bookbuild.figurelayouts`` after ``myst_nb`` in the book's extensions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform

WIDE, NARROW, FIGURE = "critscale-wide", "critscale-narrow", "critscale-two-layouts"


def _mark_images(found: list[nodes.Node], cls: str) -> None:
    for node in found:
        for image in node.findall(nodes.image):
            image["classes"].append(cls)


def _directive():
    from myst_nb.core.variables import VariableOutput, render_variable_outputs
    from myst_nb.ext.glue.directives import PasteFigureDirective
    from myst_nb.ext.glue.utils import RetrievalError, retrieve_glue_data

    from ..page.pagedata import NARROW_METADATA

    class TwoLayoutFigure(PasteFigureDirective):
        """``{glue:figure}`` with the figure's phone layout beside its wide one (module docstring)."""

        def run(self):
            result = super().run()
            try:
                data = retrieve_glue_data(self.document, self.arguments[0])
            except RetrievalError:
                return result  # the parent directive has already warned
            narrow = data.metadata.get(NARROW_METADATA)
            figure = next((n for n in result if isinstance(n, nodes.figure)), None)
            if not narrow or figure is None:
                return result
            narrow_nodes = render_variable_outputs(
                [VariableOutput(data=narrow, metadata={}, nb_renderer=data.nb_renderer, vtype="glue")],
                self.document, self.line, self.source)
            _mark_images([c for c in figure.children if not isinstance(c, (nodes.caption, nodes.legend))], WIDE)
            _mark_images(narrow_nodes, NARROW)
            position = next((i for i, c in enumerate(figure.children) if isinstance(c, (nodes.caption, nodes.legend))),
                            len(figure.children))
            for offset, node in enumerate(narrow_nodes):
                figure.insert(position + offset, node)
            figure["classes"].append(FIGURE)
            return result

    return TwoLayoutFigure


class FileFigureLayouts(SphinxTransform):
    """A ``{figure}`` whose image has a ``<name>-narrow`` file beside it gets that file as its phone layout."""

    default_priority = 500

    def apply(self, **kwargs: Any) -> None:
        for figure in list(self.document.findall(nodes.figure)):
            if FIGURE in figure["classes"]:
                continue
            images = [c for c in figure.children if isinstance(c, nodes.image)]
            if len(images) != 1:
                continue
            narrow = self._narrow_file(images[0]["uri"])
            if narrow is None:
                continue
            images[0]["classes"].append(WIDE)
            figure.insert(figure.index(images[0]) + 1, nodes.image(uri=narrow, classes=[NARROW], alt=""))
            figure["classes"].append(FIGURE)

    def _narrow_file(self, uri: str) -> str | None:
        """The uri of the phone layout beside the image ``uri`` (``a/b.*`` or ``a/b.svg``: ``a/b-narrow.svg``)."""
        if "://" in uri or uri.startswith("data:"):
            return None
        folder, _, name = uri.rpartition("/")
        stem = name.split(".")[0]
        for suffix in ("svg", "png"):
            candidate = f"{folder}/{stem}-narrow.{suffix}" if folder else f"{stem}-narrow.{suffix}"
            if Path(self.env.relfn2path(candidate, self.env.docname)[1]).exists():
                return candidate
        return None


class WideLayoutOnly(SphinxPostTransform):
    """Outside HTML the figure is the wide layout alone: the phone layout and the classes are removed."""

    default_priority = 3  # before myst-nb selects a mime type (priority 4)

    def run(self, **kwargs: Any) -> None:
        if self.app.builder.format == "html":
            return
        for figure in list(self.document.findall(nodes.figure)):
            if FIGURE not in figure["classes"]:
                continue
            figure["classes"].remove(FIGURE)
            for image in list(figure.findall(nodes.image)):
                if NARROW in image["classes"]:
                    _remove_bundle(image, figure)
                elif WIDE in image["classes"]:
                    image["classes"].remove(WIDE)


def _remove_bundle(image: nodes.image, figure: nodes.figure) -> None:
    """Remove the narrow image with the mime bundle that holds it (its outermost parent below the figure)."""
    node = image
    while node.parent is not figure:
        node = node.parent
    figure.remove(node)


def setup(app) -> dict:
    app.setup_extension("myst_nb")
    app.add_directive_to_domain("glue", "figure", _directive(), override=True)
    app.add_transform(FileFigureLayouts)
    app.add_post_transform(WideLayoutOnly)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
