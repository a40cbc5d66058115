"""Names chapter 12 and ``critscale.gpt2.stats`` imported before the kernels were split into modules.

``_common`` held four roles; they now live in :mod:`.tiles` (tile functions), :mod:`.rowstats` (the result
and its finishing), :mod:`.dispatch` (backends and argument checks) and :mod:`.twopass` (the launch).
This module only re-exports the names those callers use; remove it once they import the new modules.
"""

from .dispatch import cuda_usable, interpreter_active  # noqa: F401
from .tiles import fold_pass2 as tile_pass2  # noqa: F401
