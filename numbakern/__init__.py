"""numbakern: Numba-CUDA reductions, scans, softmax, sorts and histograms with pluggable
strategies.

Importing numbakern first chooses where kernels run (a real GPU, or Numba's CUDA
simulator on a machine without one: see :func:`backend`), and under the simulator
installs the warp intrinsics the simulator lacks. This module holds public names only;
the README's Layout section says where each part lives.
"""

from .runtime import backend as _backend

try:
    _USE_SIMULATOR, _REASON = _backend.select()
except _backend.BackendError as _error:
    if _backend.running_the_command():  # one line for the command's user, not a traceback
        raise SystemExit(f"Error: {_error}") from None
    raise

from numba import cuda  # noqa: E402, F401  (only after the backend is chosen)

if _USE_SIMULATOR:
    from .runtime import simulator as _simulator  # noqa: E402

    _simulator.install()

from .runtime.backend import Backend, BackendError  # noqa: E402

_BACKEND: Backend | None = None


def backend() -> Backend:
    """Say where numbakern's kernels run.

    Returns:
        a :class:`Backend`: ``kind`` is ``"cuda"`` or ``"simulator"``, with the
        device's name and compute capability (``None`` under the simulator) and the
        reason for the choice. Set ``NUMBAKERN_SIMULATOR=1`` to force the simulator,
        ``=0`` to forbid it (then importing numbakern raises :class:`BackendError`
        when no GPU is usable).
    """
    global _BACKEND
    if _BACKEND is None:
        _BACKEND = _backend.describe(_USE_SIMULATOR, _REASON)
    return _BACKEND


from . import strategies  # noqa: E402
from .api.average import average  # noqa: E402
from .api.histogram import bincount, histogram, histogram_counts  # noqa: E402
from .api.reductions import (  # noqa: E402
    all,
    any,
    argmax,
    argmin,
    bitwise_and_sum,
    bitwise_or_sum,
    count_nonzero,
    logsumexp,
    max,
    max_with_indices,
    mean,
    min,
    min_with_indices,
    nanargmax,
    nanargmin,
    nanmax,
    nanmean,
    nanmin,
    nanprod,
    nanstd,
    nansum,
    nanvar,
    prod,
    ptp,
    reduce,
    std,
    sum,
    var,
    xor_sum,
)
from .api.scans import (associative_scan, cummax, cummin, cumprod, cumsum,  # noqa: E402
                        cumulative_prod, cumulative_sum, logcumsumexp, nancumprod,
                        nancumsum)
from .api.losses import cross_entropy  # noqa: E402
from .api.norms import vector_norm  # noqa: E402
from .api.segments import segmented_argmax, segmented_argmin, segmented_reduce  # noqa: E402
from .api.segment_scans import scan_by_key, segmented_scan  # noqa: E402
from .api.segment_sort import segmented_sort  # noqa: E402
from .api.softmax import log_softmax, log_softmax_backward, softmax, softmax_backward  # noqa: E402
from .api.selection import (argpartition, median, nanmedian, nanpercentile,  # noqa: E402
                             nanquantile, partition, percentile, quantile)
from .api.sort import argsort, sort  # noqa: E402
from .api.select import topk  # noqa: E402
from .core.arrays import CopyWarning  # noqa: E402
from .core.axes import AxisError  # noqa: E402
from .core.deliver import OutDtypeError  # noqa: E402
from .ops import Op, op  # noqa: E402
from .runtime import warp  # noqa: E402
from .strategies import (  # noqa: E402
    AtomicFold,
    BitonicSelect,
    BitonicSort,
    Blelloch,
    DecoupledLookback,
    GlobalAtomic,
    HillisSteele,
    RadixBlockSelect,
    RadixSelect,
    RadixSort,
    ReduceThenScan,
    SharedPrivatized,
    SharedTree,
    SortSlice,
    TwoPass,
    WarpPrivatized,
    WarpShuffle,
)
from . import _moved  # noqa: E402, F401  (the flat layout's module names, deprecated)

__version__ = "0.1.0"

__all__ = [
    "AtomicFold", "AxisError", "Backend", "BackendError", "BitonicSelect", "BitonicSort",
    "Blelloch",
    "CopyWarning", "DecoupledLookback", "GlobalAtomic", "HillisSteele", "Op",
    "OutDtypeError", "RadixBlockSelect", "RadixSelect", "RadixSort", "ReduceThenScan",
    "SharedPrivatized", "SharedTree", "SortSlice",
    "TwoPass", "WarpPrivatized", "WarpShuffle", "all", "any", "average", "argmax", "argmin",
    "argsort", "associative_scan", "backend", "bincount", "bitwise_and_sum", "bitwise_or_sum",
    "count_nonzero", "cross_entropy", "cummax", "cummin", "cumprod", "cumsum",
    "cumulative_prod", "cumulative_sum", "nancumprod", "nancumsum",
    "nanprod", "nansum", "histogram", "histogram_counts", "log_softmax", "logcumsumexp",
    "logsumexp", "log_softmax_backward", "max", "max_with_indices", "mean", "min",
    "min_with_indices",
    "nanargmax", "nanargmin", "nanmax", "nanmean", "nanmin",
    "op", "prod", "ptp", "reduce", "scan_by_key", "segmented_argmax", "segmented_argmin",
    "segmented_reduce", "segmented_scan", "segmented_sort", "softmax", "softmax_backward",
    "sort", "std", "strategies", "sum", "topk",
    "var", "nanvar", "nanstd", "vector_norm", "warp", "xor_sum",
    "argpartition", "median", "nanmedian", "nanpercentile", "nanquantile", "partition",
    "percentile", "quantile",
]
