"""``python -m critscale ...``: see :mod:`critscale.cli`."""

import sys

from .cli import main

sys.exit(main())
