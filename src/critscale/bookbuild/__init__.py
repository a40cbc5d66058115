"""The book's build driver: ``python -m critscale.bookbuild <command>`` (the Makefile calls it).

- ``notebook NAME --profile P``: check the parameter file against the notebook's
  parameters cell (``params``), execute the notebook with papermill in a staging folder,
  shape the executed page for readers (``pages``) and move everything into place only
  when it succeeded (``notebook``);
- ``check-gpu``: validate every recorded GPU result (``critscale.page.gpu_results``);
- ``html`` / ``pdf --profile P``: stage the book (prose, executed notebooks, the
  appendix's table of family names, the landing page's key results, the downloadable source and
  wheel) and render it with jupyter-book, quietly (``site``).
"""
