"""The one name the attention diagnostic (``critscale.diagnostic.rows``) still imports from the module the
kernels were split out of.

``_common`` held four roles; they now live in :mod:`.tiles` (tile functions), :mod:`.rowstats` (the result
and its finishing), :mod:`.dispatch` (backends and argument checks) and :mod:`.twopass` (the launch).
Delete this module once ``critscale.diagnostic.rows`` imports :func:`critscale.kernels.dispatch.cuda_usable`.
"""

from .dispatch import cuda_usable  # noqa: F401
