"""What makes the book's pages: recorded numbers, figures, tables, provenance, GPU results, the result map.

- :mod:`.pagedata`: ``record`` and ``record_figure``, the only way a number, table or figure reaches a page;
- :mod:`.plotting` and :mod:`.narrowfigure`: the figures' look and their phone layout;
- :mod:`.tables`: publication tables; :mod:`.keys`: names of recorded values;
- :mod:`.reader_names`: the names a reader sees for the score families;
- :mod:`.provenance`: where and how a page was computed; :mod:`.gpu_results`: the committed GPU results;
- :mod:`.resultmap`: the map of the book's results to chapters, functions and tests.

The notebooks reach them as ``cs.record``, ``cs.plotting``, ``cs.tables``, ... (re-exported by :mod:`critscale`).
"""
